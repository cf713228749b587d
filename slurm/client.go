package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Client reads a Slurm cluster and changes it. CLI implements it with
// Slurm's commands; tests may fake it.
type Client interface {
	Jobs(ctx context.Context) ([]Job, error)
	Nodes(ctx context.Context) ([]Node, error)
	// Accounting is sacct --json over the jobs that ended since a time,
	// for datasets' slurm reader.
	Accounting(ctx context.Context, since time.Time) ([]byte, error)
	// Update changes jobs alike; a nil field is left as it is.
	Update(ctx context.Context, ids []string, u Update) error
	// PowerDown asks Slurm to power a node down once it is idle
	// (POWER_DOWN_ASAP), and PowerUp to power it up.
	PowerDown(ctx context.Context, node, reason string) error
	PowerUp(ctx context.Context, node string) error
	// Priority reads how the cluster weighs a job's age.
	Priority(ctx context.Context) (Priority, error)
	// Hold holds a pending job (priority 0: it does not start); Release
	// lets it go.
	Hold(ctx context.Context, id string) error
	Release(ctx context.Context, id string) error
}

// Update is a change to a job: its time limit, Nice and AdminComment.
type Update struct {
	TimeLimit    *time.Duration
	Nice         *int
	AdminComment *string
}

// CLI is a Client that runs Slurm's commands (squeue, sinfo, sacct,
// scontrol). Changing other users' jobs and nodes needs a Slurm operator
// or administrator (sacctmgr modify user NAME set adminlevel=operator),
// or root.
type CLI struct {
	// Conf is the slurm.conf the commands read (SLURM_CONF); empty: theirs.
	Conf string
	// Bin is the folder of the commands; empty: PATH.
	Bin string
	// Timeout bounds each command (default 30 s).
	Timeout time.Duration
}

var _ Client = (*CLI)(nil)

func (c *CLI) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := name
	if c.Bin != "" {
		path = c.Bin + "/" + name
	}
	cmd := exec.CommandContext(ctx, path, args...)
	// sacct reads --starttime in the local zone; ours are written in UTC.
	cmd.Env = append(os.Environ(), "TZ=UTC")
	if c.Conf != "" {
		cmd.Env = append(cmd.Env, "SLURM_CONF="+c.Conf)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 500 {
			msg = msg[:500]
		}
		if msg == "" {
			return nil, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return out.Bytes(), nil
}

// Jobs implements Client: squeue --json (all users and states it shows).
func (c *CLI) Jobs(ctx context.Context) ([]Job, error) {
	out, err := c.run(ctx, "squeue", "--json")
	if err != nil {
		return nil, err
	}
	return ParseJobs(bytes.NewReader(out))
}

// Nodes implements Client: scontrol show nodes --json (23.02 on), else
// sinfo --json (22.05; later versions group its nodes by partition and
// state).
func (c *CLI) Nodes(ctx context.Context) ([]Node, error) {
	out, err := c.run(ctx, "scontrol", "show", "nodes", "--json")
	if err != nil {
		var serr error
		if out, serr = c.run(ctx, "sinfo", "--json"); serr != nil {
			return nil, errors.Join(err, serr)
		}
	}
	return ParseNodes(bytes.NewReader(out))
}

// Accounting implements Client. A document with errors (no slurmdbd) is
// an error.
func (c *CLI) Accounting(ctx context.Context, since time.Time) ([]byte, error) {
	out, err := c.run(ctx, "sacct", "--json", "--allusers", "--state=CD,F,TO,CA,OOM,NF,PR",
		"--starttime="+since.UTC().Format("2006-01-02T15:04:05"), "--endtime=now")
	if err != nil {
		return nil, err
	}
	return out, documentErr(out, "sacct --json")
}

// documentErr is the errors a Slurm JSON document from what (a command
// or request) reports, if any, for a document passed on unparsed.
func documentErr(out []byte, what string) error {
	var doc slurmErrors
	if err := json.Unmarshal(out, &doc); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return doc.err(what)
}

// Update implements Client with scontrol update (JobId=1,2,3 for several).
func (c *CLI) Update(ctx context.Context, ids []string, u Update) error {
	for _, id := range ids {
		if err := checkID(id); err != nil {
			return err
		}
	}
	if len(ids) == 0 {
		return nil
	}
	args := []string{"update", "JobId=" + strings.Join(ids, ",")}
	if u.TimeLimit != nil {
		args = append(args, "TimeLimit="+Minutes(*u.TimeLimit))
	}
	if u.Nice != nil {
		args = append(args, "Nice="+strconv.Itoa(*u.Nice))
	}
	if u.AdminComment != nil {
		args = append(args, "AdminComment="+*u.AdminComment)
	}
	if len(args) == 2 {
		return nil
	}
	_, err := c.run(ctx, "scontrol", args...)
	return err
}

// PowerDown implements Client.
func (c *CLI) PowerDown(ctx context.Context, node, reason string) error {
	if err := checkNode(node); err != nil {
		return err
	}
	_, err := c.run(ctx, "scontrol", "update", "NodeName="+node, "State=POWER_DOWN_ASAP", "Reason="+reason)
	return err
}

// PowerUp implements Client.
func (c *CLI) PowerUp(ctx context.Context, node string) error {
	if err := checkNode(node); err != nil {
		return err
	}
	_, err := c.run(ctx, "scontrol", "update", "NodeName="+node, "State=POWER_UP")
	return err
}

// Hold implements Client: scontrol hold.
func (c *CLI) Hold(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	_, err := c.run(ctx, "scontrol", "hold", id)
	return err
}

// Release implements Client: scontrol release.
func (c *CLI) Release(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	_, err := c.run(ctx, "scontrol", "release", id)
	return err
}

// Priority implements Client: scontrol show config.
func (c *CLI) Priority(ctx context.Context) (Priority, error) {
	out, err := c.run(ctx, "scontrol", "show", "config")
	if err != nil {
		return Priority{}, err
	}
	return ParsePriority(bytes.NewReader(out))
}

// Minutes writes a limit as scontrol takes it: whole minutes, rounded up.
func Minutes(d time.Duration) string { return strconv.FormatInt(minutes(d), 10) }

// minutes is d in whole minutes, rounded up, as Slurm keeps limits.
func minutes(d time.Duration) int64 { return int64((d + time.Minute - 1) / time.Minute) }

func checkID(id string) error {
	if _, err := strconv.ParseUint(id, 10, 63); err != nil {
		return fmt.Errorf("slurm: job ID %q is not a number", id)
	}
	return nil
}

func checkNode(n string) error {
	if n == "" || strings.ContainsAny(n, " ,=[]\n") {
		return errors.New("slurm: node name " + strconv.Quote(n) + " is not one node")
	}
	return nil
}
