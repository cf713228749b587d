package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// envPrefix starts the environment variable of every flag.
const envPrefix = "PRESCIENT_"

// envName is the environment variable that sets a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fileSetting is a value from the config file and where it stands.
type fileSetting struct {
	value string
	line  int
}

// applySettings fills every flag of cmd that was not given on the command
// line from its environment variable, else from the config file. This is the
// one place where the precedence flag > env > file is implemented.
func applySettings(cmd *cobra.Command) error {
	path, err := configPath(cmd)
	if err != nil {
		return err
	}
	fromFile := map[string]fileSetting{}
	if path != "" {
		if fromFile, err = loadConfigFile(path, cmd); err != nil {
			return err
		}
	}
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "config" || f.Name == "help" {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("environment %s=%q: %w", envName(f.Name), v, err))
			}
			return
		}
		if s, ok := fromFile[f.Name]; ok {
			if err := f.Value.Set(s.value); err != nil {
				errs = append(errs, fmt.Errorf("config file %s:%d: %s: %q: %w", path, s.line, configKey(f.Name), s.value, err))
			}
		}
	})
	return errors.Join(errs...)
}

// configPath is --config, else PRESCIENT_CONFIG.
func configPath(cmd *cobra.Command) (string, error) {
	f := cmd.Flags().Lookup("config")
	if f != nil && f.Changed {
		return f.Value.String(), nil
	}
	return os.Getenv(envName("config")), nil
}

func configKey(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

// loadConfigFile reads the settings that apply to cmd: the root's flags at the
// top level, then each command on the path from the root under its name. It
// checks the whole file against the command tree, so a misspelt key in any
// section is an error even when another command runs.
func loadConfigFile(path string, cmd *cobra.Command) (map[string]fileSetting, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	return parseConfig(data, path, cmd)
}

// parseConfig is loadConfigFile on the file's content.
func parseConfig(data []byte, path string, cmd *cobra.Command) (map[string]fileSetting, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return map[string]fileSetting{}, nil
	}
	if err := checkSection(path, doc.Content[0], cmd.Root(), ""); err != nil {
		return nil, err
	}
	settings := map[string]fileSetting{}
	section := doc.Content[0]
	for i, c := range commandPath(cmd) {
		if i > 0 {
			if section = child(section, c.Name()); section == nil {
				break
			}
		}
		for j := 0; j+1 < len(section.Content); j += 2 {
			k, v := section.Content[j], section.Content[j+1]
			if v.Kind == yaml.MappingNode && subcommand(c, k.Value) != nil {
				continue // a subcommand's section
			}
			settings[strings.ReplaceAll(k.Value, "_", "-")] = fileSetting{value: scalarValue(v), line: k.Line}
		}
	}
	return settings, nil
}

// checkSection rejects keys that are neither a flag of cmd nor a subcommand.
func checkSection(path string, n *yaml.Node, cmd *cobra.Command, where string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s:%d: %s must be a mapping of settings", path, n.Line, nonEmpty(where, "the top level"))
	}
	var errs []error
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		if sub := subcommand(cmd, k.Value); sub != nil && v.Kind == yaml.MappingNode {
			if err := checkSection(path, v, sub, strings.TrimSpace(where+" "+k.Value)); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		flag := strings.ReplaceAll(k.Value, "_", "-")
		if flag == "config" || !hasFlag(cmd, flag) {
			errs = append(errs, fmt.Errorf("config file %s:%d: unknown key %q in %s", path, k.Line, k.Value, nonEmpty(where, "the top level")))
			continue
		}
		if err := checkValue(v, flagType(cmd, flag)); err != nil {
			errs = append(errs, fmt.Errorf("config file %s:%d: %s: %w", path, k.Line, k.Value, err))
		}
	}
	return errors.Join(errs...)
}

func commandPath(cmd *cobra.Command) []*cobra.Command {
	var path []*cobra.Command
	for c := cmd; c != nil; c = c.Parent() {
		path = append([]*cobra.Command{c}, path...)
	}
	return path
}

func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

func child(n *yaml.Node, key string) *yaml.Node {
	for j := 0; j+1 < len(n.Content); j += 2 {
		if n.Content[j].Value == key && n.Content[j+1].Kind == yaml.MappingNode {
			return n.Content[j+1]
		}
	}
	return nil
}

// checkValue accepts a scalar, a list of scalars, or, for a flag of
// key=value pairs, a mapping of scalars: the shapes scalarValue can turn into
// flag text without dropping anything.
func checkValue(v *yaml.Node, flagType string) error {
	switch v.Kind {
	case yaml.ScalarNode:
		return nil
	case yaml.SequenceNode:
		return allScalars(v.Content, "a list of plain values")
	case yaml.MappingNode:
		if !strings.HasPrefix(flagType, "stringTo") {
			return errors.New("takes a single value or a list, not a mapping")
		}
		return allScalars(v.Content, "a mapping of plain values")
	}
	return errors.New("takes a single value or a list")
}

func allScalars(nodes []*yaml.Node, want string) error {
	for _, n := range nodes {
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: want %s", n.Line, want)
		}
	}
	return nil
}

func flagType(cmd *cobra.Command, name string) string {
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags(), cmd.InheritedFlags()} {
		if f := fs.Lookup(name); f != nil {
			return f.Value.Type()
		}
	}
	return ""
}

// scalarValue turns a YAML value into flag text: a list becomes
// comma-separated values, a mapping comma-separated key=value pairs.
func scalarValue(v *yaml.Node) string {
	var parts []string
	switch v.Kind {
	case yaml.SequenceNode:
		for _, c := range v.Content {
			parts = append(parts, c.Value)
		}
	case yaml.MappingNode:
		for j := 0; j+1 < len(v.Content); j += 2 {
			parts = append(parts, v.Content[j].Value+"="+v.Content[j+1].Value)
		}
	default:
		return v.Value
	}
	return strings.Join(parts, ",")
}

func nonEmpty(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// hasFlag reports whether cmd takes the flag, its own or inherited.
func hasFlag(cmd *cobra.Command, name string) bool {
	return cmd.Flags().Lookup(name) != nil || cmd.PersistentFlags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
}
