// Package slurmtest starts a real Slurm for tests: Debian's Slurm 22.05
// (munged, MariaDB, slurmdbd, slurmctld, one slurmd; slurmrestd on
// request, REST) under a temporary folder, without systemd, in about six
// seconds. The daemons take JSON Web Tokens beside munge. The node has
// GPUs (GRES files are links to /dev/null, AutoDetect=off), accounting is
// on, and power saving is set up so that scontrol's POWER_DOWN_ASAP runs a
// SuspendProgram that stops slurmd and POWER_UP a ResumeProgram that
// starts it again, as a site's scripts power a node off and on; each
// writes a line to PowerLog.
//
// The daemons must be installed (scripts/ensure-slurm.sh, which make test
// runs); a missing one fails the test saying so. The cluster is stopped
// when the test ends.
package slurmtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Node is the name of the cluster's one node, and GPUs its GPUs.
const (
	Node      = "gpu1"
	GPUs      = 4
	Partition = "gpu"
	Account   = "research"
)

// Daemons are the programs a cluster needs.
var Daemons = []string{"munged", "mariadb-install-db", "mariadbd", "mariadb", "slurmdbd", "slurmctld", "slurmd",
	"sbatch", "squeue", "sinfo", "sacct", "sacctmgr", "scontrol"}

// Cluster is a running test cluster.
type Cluster struct {
	Dir  string // everything lives here
	Conf string // slurm.conf; give it to clients as SLURM_CONF
	// PowerLog holds a line per SuspendProgram ("suspend NODES") and
	// ResumeProgram ("resume NODES") run.
	PowerLog string
	procs    []proc             // in the order started, to stop in reverse
	daemons  map[string]*daemon // by name, the latest start
}

// proc is one process of the cluster: a daemon it runs in the foreground,
// or one that forks itself and is known by its pid file.
type proc struct {
	d       *daemon
	pidFile string
}

type daemon struct {
	cmd       *exec.Cmd
	done      chan struct{}
	env, args []string
}

// Start starts a cluster and stops it when t ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	for _, d := range Daemons {
		if _, err := exec.LookPath(d); err != nil {
			t.Fatalf("slurmtest: %s is not installed: run scripts/ensure-slurm.sh (Debian's slurmctld, slurmd, slurmdbd, slurm-client, munge and mariadb-server)", d)
		}
	}
	if jwt, _ := filepath.Glob("/usr/lib/*/slurm-wlm/auth_jwt.so"); len(jwt) == 0 {
		t.Fatalf("slurmtest: Slurm's JWT plugin is not installed: run scripts/ensure-slurm.sh (Debian's slurm-wlm-jwt-plugin)")
	}
	// Unix socket paths are short (108 bytes): not under t.TempDir's long names.
	dir, err := os.MkdirTemp("", "slurmtest")
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), PowerLog: filepath.Join(dir, "power.log")}
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			for _, l := range []string{"slurmctld.log", "slurmd.log", "slurmdbd.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, "log", l))
				t.Logf("slurmtest: end of %s:\n%s", l, tail(b, 3000))
			}
		}
		os.RemoveAll(dir)
	})
	if err := c.start(t); err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	return c
}

func (c *Cluster) start(t testing.TB) error {
	d := c.Dir
	for _, sub := range []string{"munge", "db", "state", "spool", "log", "dev", "jwt"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o700); err != nil {
			return err
		}
	}
	// slurmrestd runs as nobody and reads slurm.conf; the keys stay in
	// folders only root reads.
	if err := os.Chmod(d, 0o755); err != nil {
		return err
	}
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	dbPort, dbdPort, ctldPort, slurmdPort := ports[0], ports[1], ports[2], ports[3]
	sock := filepath.Join(d, "munge", "munge.sock")

	// 1. munged with a key of its own.
	key := make([]byte, 1024)
	f, err := os.Open("/dev/urandom")
	if err != nil {
		return err
	}
	_, err = f.Read(key)
	f.Close()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, "munge", "munge.key"), key, 0o400); err != nil {
		return err
	}
	jwtKey := filepath.Join(d, "jwt", "jwt.key")
	if err := os.WriteFile(jwtKey, key[:64], 0o600); err != nil {
		return err
	}
	if err := run(d, nil, "munged", "--socket="+sock, "--key-file="+filepath.Join(d, "munge", "munge.key"),
		"--pid-file="+filepath.Join(d, "munge", "munged.pid"), "--log-file="+filepath.Join(d, "log", "munged.log"),
		"--seed-file="+filepath.Join(d, "munge", "seed"), "--force"); err != nil {
		return err
	}
	c.pidFile(filepath.Join(d, "munge", "munged.pid"))

	// 2. MariaDB on a loopback port, a user for slurmdbd.
	if err := run(d, nil, "mariadb-install-db", "--datadir="+filepath.Join(d, "db"), "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db"); err != nil {
		return err
	}
	dbSock := filepath.Join(d, "db", "sock")
	c.daemon(nil, "mariadbd", "--no-defaults", "--datadir="+filepath.Join(d, "db"), "--user=root",
		"--port="+strconv.Itoa(dbPort), "--bind-address=127.0.0.1", "--socket="+dbSock,
		"--log-error="+filepath.Join(d, "log", "mariadb.log"))
	if err := retry(15*time.Second, func() error {
		return run(d, nil, "mariadb", "--socket="+dbSock, "-uroot", "-e", "select 1")
	}); err != nil {
		return fmt.Errorf("mariadb did not start: %w", err)
	}
	if err := run(d, nil, "mariadb", "--socket="+dbSock, "-uroot", "-e",
		"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm'; GRANT ALL ON *.* TO 'slurm'@'127.0.0.1';"); err != nil {
		return err
	}

	// 3. The configuration: slurmdbd.conf beside slurm.conf (slurmdbd
	// finds it through SLURM_CONF), GRES files, power programs.
	for i := range GPUs {
		if err := os.Symlink("/dev/null", filepath.Join(d, "dev", "gpu"+strconv.Itoa(i))); err != nil {
			return err
		}
	}
	env := []string{"SLURM_CONF=" + c.Conf}
	host, err := os.Hostname() // slurmctld runs only where its SlurmctldHost says
	if err != nil {
		return err
	}
	files := map[string]string{
		"slurmdbd.conf": fmt.Sprintf(`AuthType=auth/munge
AuthInfo=socket=%[1]s
DbdHost=localhost
DbdPort=%[2]d
SlurmUser=root
PidFile=%[3]s/slurmdbd.pid
LogFile=%[3]s/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=%[4]d
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=%[5]s
`, sock, dbdPort, d, dbPort, jwtKey),
		"slurm.conf": fmt.Sprintf(`ClusterName=ptest
SlurmctldHost=%[9]s(127.0.0.1)
SlurmctldPort=%[1]d
SlurmdPort=%[2]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[3]s
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=%[10]s
StateSaveLocation=%[4]s/state
SlurmdSpoolDir=%[4]s/spool
SlurmctldPidFile=%[4]s/slurmctld.pid
SlurmdPidFile=%[4]s/slurmd.pid
SlurmctldLogFile=%[4]s/log/slurmctld.log
SlurmdLogFile=%[4]s/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
PriorityType=priority/multifactor
PriorityWeightAge=100000
PriorityWeightPartition=10000
PriorityMaxAge=1-0
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=%[5]d
AccountingStoragePass=%[3]s
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
KillWait=2
MinJobAge=2
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
SuspendProgram=%[4]s/suspend.sh
ResumeProgram=%[4]s/resume.sh
SuspendTime=86400
SuspendTimeout=5
ResumeTimeout=30
DefMemPerCPU=100
NodeName=%[6]s NodeAddr=127.0.0.1 CPUs=16 RealMemory=16000 Gres=gpu:%[7]d State=UNKNOWN
PartitionName=%[8]s Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, ctldPort, slurmdPort, sock, d, dbdPort, Node, GPUs, Partition, host, jwtKey),
		"gres.conf": fmt.Sprintf("AutoDetect=off\nNodeName=%s Name=gpu File=%s/dev/gpu[0-%d]\n", Node, d, GPUs-1),
		// A site's programs power the node off and on; these stop slurmd and
		// start it again (-b: as if the node had booted). slurmctld runs them
		// with a bare environment: every path is absolute.
		"suspend.sh": fmt.Sprintf("#!/bin/sh\necho \"suspend $*\" >> %[1]s/power.log\nkill $(cat %[1]s/slurmd.pid)\n", d),
		"resume.sh": fmt.Sprintf("#!/bin/sh\necho \"resume $*\" >> %[1]s/power.log\n"+
			"SLURM_CONF=%[2]s /usr/bin/setsid %[3]s -b -N %[4]s -f %[2]s >/dev/null 2>&1 </dev/null &\n",
			d, c.Conf, lookPath("slurmd"), Node),
	}
	for name, text := range files {
		mode := os.FileMode(0o600)
		switch {
		case strings.HasSuffix(name, ".sh"):
			mode = 0o700
		case name == "slurm.conf" || name == "gres.conf":
			mode = 0o644 // for slurmrestd
		}
		if err := os.WriteFile(filepath.Join(d, name), []byte(text), mode); err != nil {
			return err
		}
	}

	// 4. slurmdbd, the cluster and an account in it, then slurmctld and slurmd.
	c.daemon(env, "slurmdbd", "-D")
	if err := retry(30*time.Second, func() error {
		// slurmdbd exits ("Unable to initialize accounting_storage/mysql")
		// when MariaDB, busy starting on a loaded machine, is slow to take
		// its first connection: start it again.
		if dbd := c.daemons["slurmdbd"]; dbd != nil && exited(dbd) {
			c.daemon(env, "slurmdbd", "-D")
		}
		return run(d, env, "sacctmgr", "-i", "add", "cluster", "ptest")
	}); err != nil {
		return fmt.Errorf("slurmdbd did not start: %w", err)
	}
	if err := run(d, env, "sacctmgr", "-i", "add", "account", Account); err != nil {
		return err
	}
	if err := run(d, env, "sacctmgr", "-i", "add", "user", "root", "account="+Account, "defaultaccount="+Account); err != nil {
		return err
	}
	c.daemon(env, "slurmctld", "-D", "-f", c.Conf)
	c.pidFile(filepath.Join(d, "slurmd.pid")) // slurmd may be restarted by resume.sh
	if err := run(d, env, "slurmd", "-N", Node, "-f", c.Conf); err != nil {
		return err
	}
	return c.WaitNode(t, "idle", 30*time.Second)
}

// Env is the environment a Slurm client of this cluster needs.
func (c *Cluster) Env() []string { return append(os.Environ(), "SLURM_CONF="+c.Conf) }

// Run runs a Slurm command against the cluster and returns its output.
func (c *Cluster) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = c.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("slurmtest: %s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Sbatch submits a batch job and returns its ID. The job works in Dir
// (its slurm-N.out too).
func (c *Cluster) Sbatch(t testing.TB, args ...string) string {
	t.Helper()
	out := strings.TrimSpace(c.Run(t, "sbatch", append([]string{"--parsable", "--chdir=" + c.Dir}, args...)...))
	id, _, _ := strings.Cut(out, ";")
	return id
}

// WaitNode waits until sinfo reports the node in state (idle, mixed,
// "idle~" for powered down, ...).
func (c *Cluster) WaitNode(t testing.TB, state string, timeout time.Duration) error {
	var last string
	err := retry(timeout, func() error {
		// Not sinfo -n: 22.05 has it report a node idle again as "mixed".
		cmd := exec.Command("sinfo", "-h", "-N", "-o", "%N %T")
		cmd.Env = c.Env()
		out, err := cmd.Output()
		last = strings.TrimPrefix(strings.TrimSpace(string(out)), Node+" ")
		if err != nil || last != state {
			return fmt.Errorf("node %s is %q, not %q", Node, last, state)
		}
		return nil
	})
	return err
}

// REST starts slurmrestd on a loopback port, as nobody (it refuses to
// run as root), taking JSON Web Tokens, and returns its address
// (http://127.0.0.1:PORT) and a token for root that lasts an hour.
func (c *Cluster) REST(t testing.TB) (url, token string) {
	t.Helper()
	if _, err := exec.LookPath("slurmrestd"); err != nil {
		t.Fatalf("slurmtest: slurmrestd is not installed: run scripts/ensure-slurm.sh (Debian's slurmrestd and slurm-wlm-jwt-plugin)")
	}
	ports, err := freePorts(1)
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	out := strings.TrimSpace(c.Run(t, "scontrol", "token", "username=root", "lifespan=3600"))
	token, ok := strings.CutPrefix(out, "SLURM_JWT=")
	if !ok {
		t.Fatalf("slurmtest: scontrol token said %q", out)
	}
	url = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	// SLURM_JWT=daemon: slurmrestd passes each request's token on to
	// slurmctld and slurmdbd instead of authenticating itself with munge.
	c.daemon([]string{"SLURM_CONF=" + c.Conf, "SLURM_JWT=daemon"}, "slurmrestd",
		"-a", "rest_auth/jwt", "-u", "nobody", "-f", c.Conf, "127.0.0.1:"+strconv.Itoa(ports[0]))
	if err := retry(20*time.Second, func() error {
		req, err := http.NewRequest("GET", url+"/slurm/v0.0.38/ping", nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-SLURM-USER-NAME", "root")
		req.Header.Set("X-SLURM-USER-TOKEN", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ping: %s", resp.Status)
		}
		return nil
	}); err != nil {
		t.Fatalf("slurmtest: slurmrestd did not answer: %v", err)
	}
	return url, token
}

func (c *Cluster) daemon(env []string, name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		d := &daemon{cmd: cmd, done: make(chan struct{}), env: env, args: args}
		c.procs = append(c.procs, proc{d: d})
		go func() { cmd.Wait(); close(d.done) }()
		if c.daemons == nil {
			c.daemons = map[string]*daemon{}
		}
		c.daemons[name] = d
	}
}

// StopDaemon stops one of the cluster's daemons (slurmctld, slurmdbd or
// mariadbd) as an operator would, with SIGTERM, and waits for it to exit.
func (c *Cluster) StopDaemon(t testing.TB, name string) {
	t.Helper()
	d := c.daemons[name]
	if d == nil {
		t.Fatalf("slurmtest: no daemon %s", name)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("slurmtest: %s did not stop within 30 s", name)
	}
}

// StartDaemon starts a stopped daemon again and waits until it answers.
func (c *Cluster) StartDaemon(t testing.TB, name string) {
	t.Helper()
	d := c.daemons[name]
	if d == nil {
		t.Fatalf("slurmtest: no daemon %s", name)
	}
	c.daemon(d.env, name, d.args...)
	env := []string{"SLURM_CONF=" + c.Conf}
	probe := map[string][]string{"slurmctld": {"scontrol", "ping"}, "slurmdbd": {"sacctmgr", "-n", "show", "cluster"}}[name]
	if probe == nil {
		return
	}
	if err := retry(30*time.Second, func() error {
		if err := run(c.Dir, env, probe[0], probe[1:]...); err != nil {
			return err
		}
		if name == "slurmctld" { // scontrol ping succeeds with the controller DOWN
			return run(c.Dir, env, "squeue", "-h")
		}
		return nil
	}); err != nil {
		t.Fatalf("slurmtest: %s did not come back: %v", name, err)
	}
}

// exited says whether d's process has exited.
func exited(d *daemon) bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// pidFile records a daemon that forks itself, to be stopped by its pid file.
func (c *Cluster) pidFile(path string) {
	c.procs = append(c.procs, proc{pidFile: path})
}

func (c *Cluster) stop() {
	cancel := exec.Command("scancel", "--user=root", "--full")
	cancel.Env = c.Env()
	cancel.Run()
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p.d != nil {
			p.d.cmd.Process.Signal(syscall.SIGTERM)
			continue
		}
		b, err := os.ReadFile(p.pidFile)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range c.procs {
		if p.d == nil {
			continue
		}
		select {
		case <-p.d.done:
		case <-time.After(time.Until(deadline)):
			p.d.cmd.Process.Kill()
		}
	}
	// A slurmd that resume.sh started after the pid file was read, and the
	// jobs' slurmstepd and processes that outlived their slurmd: all carry
	// this cluster's SLURM_CONF in their environment.
	exec.Command("pkill", "-KILL", "-f", c.Dir).Run()
	killByEnv("SLURM_CONF=" + c.Conf)
}

// killByEnv kills every process whose environment holds entry.
func killByEnv(entry string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", p.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == entry {
				syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

func run(dir string, env []string, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, tail(out.Bytes(), 2000))
	}
	return nil
}

func retry(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func lookPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return name
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
