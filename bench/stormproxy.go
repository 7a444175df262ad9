package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/corral-rt/corral/internal/faultproxy"
)

// ProxyChildArg is the first argument with which corral-bench runs as one
// of storm's proxy processes (see ProxyChildMain).
const ProxyChildArg = "__storm-proxy"

// A proxied connection costs the proxy 6 open files (two sockets, and a
// pipe pair per direction for splice) and the generator's client one:
// clientsPerProxy keeps a proxy process well under a 20,000-file limit.
const (
	filesPerProxied = 7
	clientsPerProxy = 2500
)

// stormProxy is a faultproxy in this process or in a child.
type stormProxy interface {
	Addr() string
	ResetAll() int
	Close() error
}

// ProxyChildMain runs a faultproxy in front of target for a storm run in
// another process: it raises its open-file limit, prints the proxy's
// address, then for every line "reset" on stdin resets every connection
// and prints how many it cut; it closes the proxy at the end of stdin.
func ProxyChildMain(target string, stdin io.Reader, stdout io.Writer) error {
	if _, err := raiseFileLimit(); err != nil {
		return err
	}
	p, err := faultproxy.Start(target)
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintln(stdout, p.Addr())
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "reset" {
			fmt.Fprintln(stdout, p.ResetAll())
		}
	}
	return sc.Err()
}

// childProxy is a proxy process started by startChildProxy.
type childProxy struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	addr string
	mu   sync.Mutex
}

// startChildProxy runs this executable as a proxy process (it must be
// corral-bench, which calls ProxyChildMain for ProxyChildArg).
func startChildProxy(target string) (*childProxy, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, ProxyChildArg, target)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &childProxy{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	line, err := c.out.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: storm: proxy process %s: %w", exe, err)
	}
	c.addr = strings.TrimSpace(line)
	return c, nil
}

func (c *childProxy) Addr() string { return c.addr }

// ResetAll asks the child to reset; it returns as soon as the request is
// written. wait reads the count.
func (c *childProxy) ResetAll() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.in, "reset\n"); err != nil {
		return 0
	}
	return -1
}

func (c *childProxy) wait() int {
	line, err := c.out.ReadString('\n')
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line))
	return n
}

func (c *childProxy) Close() error {
	c.in.Close()
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}

// resetAll resets every proxy, as nearly at once as possible, and returns
// how many client connections were cut.
func resetAll(ps []stormProxy) int {
	n := 0
	for _, p := range ps {
		if k := p.ResetAll(); k > 0 {
			n += k
		}
	}
	for _, p := range ps {
		if c, ok := p.(*childProxy); ok {
			n += c.wait()
		}
	}
	return n
}
