package webhook

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// EventTypes are the lifecycle events a hook can take: the store's event
// types, as service.LifecycleEvent.Type carries them, an inference node's
// loan changes and a node's parking.
var eventTypes = []string{
	"submitted", "started", "checkpoint_requested", "checkpointed", "checkpoint_abandoned",
	"preempted", "requeued", "start_failed", "finished", "failed", "cancelled",
	// An inference node's loan (lending.Config): no job, no tenant.
	"node_lent", "node_returning", "node_serving",
	// A node's parking (parking.Config): no job, no tenant.
	"node_parked", "node_waking", "node_awake",
}

// EventTypes lists the event types a hook's filter may name.
func EventTypes() []string { return slices.Clone(eventTypes) }

// MinSecretBytes is the shortest secret a hook may have.
const MinSecretBytes = 16

// DefaultTimeout bounds one delivery attempt unless a hook says otherwise.
const DefaultTimeout = 10 * time.Second

// Hook is one receiver of lifecycle events.
type Hook struct {
	// Name identifies the hook in logs and metrics.
	Name string
	URL  string
	// Secret is the HMAC-SHA256 key of the signature header.
	Secret []byte
	// Events the hook takes; empty for all.
	Events []string
	// Tenants whose jobs the hook hears about; empty for all.
	Tenants []string
	// Timeout bounds one delivery attempt (default DefaultTimeout).
	Timeout time.Duration
}

// Config is the webhooks of a control plane.
type Config struct {
	Hooks []Hook
}

// Validate checks every hook; the errors name the hook and the field.
func (c Config) Validate() error {
	var errs []error
	names := map[string]int{}
	for i, h := range c.Hooks {
		at := fmt.Sprintf("webhooks[%d]", i)
		if h.Name == "" {
			errs = append(errs, fmt.Errorf("%s.name: empty", at))
		} else if j, ok := names[h.Name]; ok {
			errs = append(errs, fmt.Errorf("%s.name: %q is also webhooks[%d]'s", at, h.Name, j))
		}
		names[h.Name] = i
		if err := checkURL(h.URL); err != nil {
			errs = append(errs, fmt.Errorf("%s.url: %w", at, err))
		}
		if len(h.Secret) < MinSecretBytes {
			errs = append(errs, fmt.Errorf("%s.secret: %d bytes; at least %d", at, len(h.Secret), MinSecretBytes))
		}
		for j, e := range h.Events {
			if !slices.Contains(eventTypes, e) {
				errs = append(errs, fmt.Errorf("%s.events[%d]: %q is not an event type (want one of %v)", at, j, e, eventTypes))
			}
		}
		for j, t := range h.Tenants {
			if t == "" {
				errs = append(errs, fmt.Errorf("%s.tenants[%d]: empty", at, j))
			}
		}
		if h.Timeout < 0 || h.Timeout > 5*time.Minute {
			errs = append(errs, fmt.Errorf("%s.timeout_s: %s is outside 0..300 s", at, h.Timeout))
		}
	}
	return errors.Join(errs...)
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return errors.New("empty")
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http or https URL", s)
	case u.Host == "":
		return fmt.Errorf("%q: no host", s)
	}
	return nil
}

// LoadConfig reads a webhooks file (see ParseConfig).
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("webhooks file: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig parses a webhooks file: YAML with one key, webhooks, a list
// of hooks:
//
//	webhooks:
//	  - name: tracker
//	    url: https://tracker.example.com/hooks/prescient
//	    secret: "a-long-random-shared-secret"
//	    events: [started, checkpointed, finished, failed]   # optional: all
//	    tenants: [ml]                                        # optional: all
//	    timeout_s: 5                                         # optional: 10
//
// Errors name the file, the line and the field. The result is validated.
func ParseConfig(data []byte, path string) (Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Config{}, fmt.Errorf("webhooks file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return Config{}, fmt.Errorf("webhooks file %s: empty (want a list under the key webhooks)", path)
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return Config{}, fmt.Errorf("webhooks file %s:%d: the top level must be a mapping with the key webhooks", path, top.Line)
	}
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if k := top.Content[i]; k.Value != "webhooks" {
			return Config{}, fmt.Errorf("webhooks file %s:%d: unknown key %q (want webhooks)", path, k.Line, k.Value)
		}
		list = top.Content[i+1]
	}
	if list == nil || list.Kind != yaml.SequenceNode {
		return Config{}, fmt.Errorf("webhooks file %s:%d: webhooks must be a list", path, top.Line)
	}
	var cfg Config
	var errs []error
	for i, n := range list.Content {
		h, err := parseHook(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("webhooks file %s:%d: webhooks[%d]%w", path, n.Line, i, err))
			continue
		}
		cfg.Hooks = append(cfg.Hooks, h)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("webhooks file %s: %w", path, err)
	}
	return cfg, nil
}

func parseHook(n *yaml.Node) (Hook, error) {
	if n.Kind != yaml.MappingNode {
		return Hook{}, errors.New(": want a mapping with name, url and secret")
	}
	var h Hook
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		field := func(format string, args ...any) error {
			return fmt.Errorf(".%s: line %d: %s", k.Value, v.Line, fmt.Sprintf(format, args...))
		}
		switch k.Value {
		case "name", "url", "secret", "timeout_s":
			if v.Kind != yaml.ScalarNode {
				return Hook{}, field("want a plain value")
			}
		case "events", "tenants":
			if v.Kind != yaml.SequenceNode {
				return Hook{}, field("want a list")
			}
		default:
			return Hook{}, field("unknown field (want name, url, secret, events, tenants, timeout_s)")
		}
		switch k.Value {
		case "name":
			h.Name = v.Value
		case "url":
			h.URL = v.Value
		case "secret":
			h.Secret = []byte(v.Value)
		case "timeout_s":
			s, err := strconv.ParseFloat(v.Value, 64)
			if err != nil || s <= 0 || s > 300 {
				return Hook{}, field("%q: want seconds in (0, 300]", v.Value)
			}
			h.Timeout = time.Duration(s * float64(time.Second))
		case "events", "tenants":
			var vals []string
			for _, c := range v.Content {
				if c.Kind != yaml.ScalarNode {
					return Hook{}, field("line %d: want plain values", c.Line)
				}
				vals = append(vals, c.Value)
			}
			if k.Value == "events" {
				h.Events = vals
			} else {
				h.Tenants = vals
			}
		}
	}
	return h, nil
}
