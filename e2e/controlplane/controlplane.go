// Package controlplane starts a real Kubernetes control plane on loopback for the sharing-affinity
// e2e test and benchmark: etcd and kube-apiserver (built by e2e/build.sh into e2e/.bin), and on
// demand kube-controller-manager (the resource-claim controller) and a scheduler binary.
//
// Everything listens on 127.0.0.1 on free ports and lives in one temporary directory. Every
// process runs in its own process group with Pdeathsig, and Stop kills the groups, so nothing is
// left behind when a test fails or the test binary dies.
package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// AdminToken is the bearer token of the admin user (group system:masters) in the token file.
const AdminToken = "admintoken"

// FeatureGates are the gates given to kube-apiserver, kube-controller-manager and the in-tree
// kube-scheduler v1.37.2: consumable capacity (allowMultipleAllocations, shareID, consumedCapacity)
// and DeviceTaintRules. Binding conditions (KEP-5007) need no gate here: DRADeviceBindingConditions
// (beta) and DRAResourceClaimDeviceStatus (GA, locked) are on by default in v1.37.
const FeatureGates = "DRAConsumableCapacity=true,DRADeviceTaintRules=true"

// Options configure Start.
type Options struct {
	// BinDir holds etcd and kube-apiserver (default: DefaultBinDir()).
	BinDir string
	// Namespaces to create, each with its default ServiceAccount.
	Namespaces []string
	// ExtraAPIServerArgs are appended to kube-apiserver's arguments.
	ExtraAPIServerArgs []string
	// Logf reports progress (t.Logf); nil is silent.
	Logf func(format string, args ...any)
}

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	Dir        string // temporary directory: data, certificates, logs, kubeconfig
	BinDir     string
	EtcdURL    string
	URL        string // https://127.0.0.1:PORT
	Kubeconfig string // path of the admin kubeconfig
	RestConfig *rest.Config
	Client     kubernetes.Interface

	// APIServerStartup is how long kube-apiserver took from exec to /readyz ok.
	APIServerStartup time.Duration

	logf  func(string, ...any)
	mu    sync.Mutex
	procs []*Process
}

// DefaultBinDir is e2e/.bin (found from this source file), or $SA_E2E_BIN when set.
func DefaultBinDir() string {
	if d := os.Getenv("SA_E2E_BIN"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(filepath.Dir(file)), ".bin")
}

// MissingBinaries names the binaries of names that are not in binDir.
func MissingBinaries(binDir string, names ...string) []string {
	var missing []string
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(binDir, n)); err != nil || st.IsDir() {
			missing = append(missing, filepath.Join(binDir, n))
		}
	}
	return missing
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts etcd and kube-apiserver, waits for /readyz, writes the kubeconfig and creates
// the namespaces. On error everything started is stopped again.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	if opts.BinDir == "" {
		opts.BinDir = DefaultBinDir()
	}
	if m := MissingBinaries(opts.BinDir, "etcd", "kube-apiserver"); len(m) > 0 {
		return nil, fmt.Errorf("missing binaries %v: run e2e/build.sh", m)
	}
	dir, err := os.MkdirTemp("", "sa-e2e-")
	if err != nil {
		return nil, err
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	cp = &ControlPlane{Dir: dir, BinDir: opts.BinDir, logf: logf}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()

	// etcd
	clientPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	cp.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	if _, err = cp.StartProcess("etcd", filepath.Join(cp.BinDir, "etcd"),
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", cp.EtcdURL, "--advertise-client-urls", cp.EtcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peerPort),
		"--listen-metrics-urls", "", "--log-level", "warn",
		"--quota-backend-bytes", "8589934592",
		"--unsafe-no-fsync",
	); err != nil {
		return nil, err
	}
	if err = waitHTTP(ctx, cp.EtcdURL+"/health", 60*time.Second, nil); err != nil {
		return nil, fmt.Errorf("etcd: %w\n%s", err, cp.Logs())
	}

	// service-account key pair, token file
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	saKey, saPub := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err = os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return nil, err
	}
	if err = os.WriteFile(saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err = os.WriteFile(tokens, []byte(AdminToken+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}

	// kube-apiserver
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	args := []string{
		"--etcd-servers=" + cp.EtcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// v1alpha3 for DeviceTaintRules; v1beta1 and v1beta2 (off by default in v1.37) for
		// clients older than v1.34, which have no resource.k8s.io/v1 (a v1.33 scheduler).
		"--runtime-config=resource.k8s.io/v1alpha3=true,resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true",
		"--feature-gates=" + FeatureGates,
		// A benchmark creates thousands of objects quickly: no client-side or priority-and-fairness
		// throttling in the server.
		"--max-requests-inflight=3000", "--max-mutating-requests-inflight=1000",
		"--enable-priority-and-fairness=false",
	}
	args = append(args, opts.ExtraAPIServerArgs...)
	start := time.Now()
	if _, err = cp.StartProcess("kube-apiserver", filepath.Join(cp.BinDir, "kube-apiserver"), args...); err != nil {
		return nil, err
	}
	if err = waitHTTP(ctx, cp.URL+"/readyz", 180*time.Second, map[string]string{"Authorization": "Bearer " + AdminToken}); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w\n%s", err, cp.Logs())
	}
	cp.APIServerStartup = time.Since(start)
	logf("kube-apiserver %s ready after %s", cp.URL, cp.APIServerStartup.Round(time.Millisecond))

	// kubeconfig and client
	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err = os.WriteFile(cp.Kubeconfig, []byte(KubeconfigYAML(cp.URL, AdminToken)), 0o600); err != nil {
		return nil, err
	}
	if cp.RestConfig, err = clientcmd.BuildConfigFromFlags("", cp.Kubeconfig); err != nil {
		return nil, err
	}
	cp.RestConfig.QPS, cp.RestConfig.Burst = 5000, 5000
	if cp.Client, err = kubernetes.NewForConfig(cp.RestConfig); err != nil {
		return nil, err
	}
	for _, ns := range opts.Namespaces {
		if err = cp.CreateNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// KubeconfigYAML is a kubeconfig for server with a bearer token, TLS verification off.
func KubeconfigYAML(server, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: e2e
  context:
    cluster: e2e
    user: admin
current-context: e2e
`, server, token)
}

// CreateNamespace creates ns and its default ServiceAccount (no controller-manager creates it
// here; without it the ServiceAccount admission plugin refuses pods).
func (cp *ControlPlane) CreateNamespace(ctx context.Context, ns string) error {
	_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	f := false
	_, err = cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta:                   metav1.ObjectMeta{Name: "default"},
		AutomountServiceAccountToken: &f,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create serviceaccount %s/default: %w", ns, err)
	}
	return nil
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration, headers map[string]string) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err == nil {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(b.String()))
		} else {
			last = err.Error()
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %s", url, timeout, last)
}

// Process is one child process with its log file.
type Process struct {
	Name    string
	Cmd     *exec.Cmd
	LogPath string
	done    chan struct{}
	waitErr error
	stopped bool
	mu      sync.Mutex
}

// StartProcess starts bin with args in its own process group, stdout and stderr to
// Dir/NAME.log (NAME-2.log, ... for a restart), and registers it for Stop.
func (cp *ControlPlane) StartProcess(name, bin string, args ...string) (*Process, error) {
	return cp.StartProcessIn("", name, bin, args...)
}

// StartProcessIn is StartProcess with working directory dir ("" is cp.Dir).
func (cp *ControlPlane) StartProcessIn(dir, name, bin string, args ...string) (*Process, error) {
	logPath := filepath.Join(cp.Dir, name+".log")
	for i := 2; ; i++ {
		if _, err := os.Stat(logPath); os.IsNotExist(err) {
			break
		}
		logPath = filepath.Join(cp.Dir, fmt.Sprintf("%s-%d.log", name, i))
	}
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(lf, "# %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Dir = cp.Dir
	if dir != "" {
		cmd.Dir = dir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Cmd: cmd, LogPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	cp.mu.Lock()
	cp.procs = append(cp.procs, p)
	cp.mu.Unlock()
	cp.logf("started %s (pid %d), log %s", name, cmd.Process.Pid, logPath)
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, and SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	pgid := p.Cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children that outlived the leader.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// Kill ends the process group at once (a crash, for restart tests).
func (p *Process) Kill() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop stops every process in reverse start order and removes the directory unless
// SA_E2E_KEEP is set (then it is logged).
func (cp *ControlPlane) Stop() {
	cp.mu.Lock()
	procs := append([]*Process(nil), cp.procs...)
	cp.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(10 * time.Second)
	}
	if os.Getenv("SA_E2E_KEEP") != "" {
		cp.logf("kept %s", cp.Dir)
		return
	}
	_ = os.RemoveAll(cp.Dir)
}

// Logs returns the last lines of every process's log, for a failing test to print.
func (cp *ControlPlane) Logs() string {
	return cp.LogTail(60)
}

// LogTail returns the last n lines of every log.
func (cp *ControlPlane) LogTail(n int) string {
	cp.mu.Lock()
	procs := append([]*Process(nil), cp.procs...)
	cp.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		data, _ := os.ReadFile(p.LogPath)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		exited, werr := p.Exited()
		state := "running"
		if exited {
			state = fmt.Sprintf("exited: %v", werr)
		}
		fmt.Fprintf(&b, "----- %s (%s), last %d lines of %s -----\n%s\n", p.Name, state, len(lines), p.LogPath, strings.Join(lines, "\n"))
	}
	return b.String()
}

// StartControllerManager starts kube-controller-manager with only the resource-claim
// controller (it turns a pod's ResourceClaimTemplates into ResourceClaims).
func (cp *ControlPlane) StartControllerManager(extraArgs ...string) (*Process, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--controllers=resourceclaim-controller",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(cp.Dir, "kcm-certs"),
		"--feature-gates=" + FeatureGates,
		"--kube-api-qps=1000", "--kube-api-burst=1000",
		"--concurrent-resourceclaim-syncs=20",
	}
	return cp.StartProcess("kube-controller-manager", filepath.Join(cp.BinDir, "kube-controller-manager"), append(args, extraArgs...)...)
}

// Scheduler says how to run a scheduler binary under test.
type Scheduler struct {
	Name   string // log name, e.g. "kube-scheduler" or "sharing-affinity-scheduler"
	Binary string
	// Config is the KubeSchedulerConfiguration YAML; the placeholder {{KUBECONFIG}} is
	// replaced by the admin kubeconfig path. Written to Dir/NAME-config.yaml and passed as
	// --config.
	Config string
	// Args are appended (e.g. --feature-gates, -v=2). --secure-port (a free port) and
	// --bind-address=127.0.0.1 are added unless Args set them.
	Args []string
	// Dir is the working directory ("" is the control plane's directory), e.g. the directory
	// of a deployment's configuration whose relative paths (a wasm guest) it resolves.
	Dir string
}

// StartScheduler writes the configuration and starts the scheduler.
func (cp *ControlPlane) StartScheduler(s Scheduler) (*Process, error) {
	name := s.Name
	if name == "" {
		name = filepath.Base(s.Binary)
	}
	var args []string
	if s.Config != "" {
		path := filepath.Join(cp.Dir, name+"-config.yaml")
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(s.Config, "{{KUBECONFIG}}", cp.Kubeconfig)), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--config="+path)
	}
	joined := strings.Join(s.Args, " ")
	if !strings.Contains(joined, "--secure-port") {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		args = append(args, fmt.Sprintf("--secure-port=%d", port))
	}
	if !strings.Contains(joined, "--bind-address") {
		args = append(args, "--bind-address=127.0.0.1")
	}
	args = append(args, s.Args...)
	return cp.StartProcessIn(s.Dir, name, s.Binary, args...)
}

// DefaultSchedulerConfig is a KubeSchedulerConfiguration (v1) for the in-tree scheduler: the
// admin kubeconfig, no leader election, fast client.
const DefaultSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {{KUBECONFIG}}
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
`

// CPUSeconds is the user+system CPU time each running process has used so far, by name (from
// /proc/PID/stat, 100 ticks a second).
func (cp *ControlPlane) CPUSeconds() map[string]float64 {
	cp.mu.Lock()
	procs := append([]*Process(nil), cp.procs...)
	cp.mu.Unlock()
	out := map[string]float64{}
	for _, p := range procs {
		if exited, _ := p.Exited(); exited {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses: state is field 3, utime 14, stime 15.
		rest := string(data)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) < 13 {
			continue
		}
		var ut, st float64
		fmt.Sscan(f[11], &ut)
		fmt.Sscan(f[12], &st)
		out[p.Name] += (ut + st) / 100
	}
	return out
}
