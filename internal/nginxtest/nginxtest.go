// Package nginxtest starts a private nginx for a test: a generated
// configuration in the test's temporary directory, listening on free
// loopback ports, stopped by tb.Cleanup. It never touches the machine's
// own nginx (its configuration, pid file, logs or ports).
package nginxtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"
)

const notFound = "nginx not found: install it (Debian/Ubuntu: sudo apt-get install -y nginx-light, " +
	"or run tools/install-deps.sh; macOS: brew install nginx) or set NGINX to its path"

// Binary is the nginx to run: $NGINX, else nginx on PATH, else
// /usr/sbin/nginx (Debian's, off a user's PATH).
func Binary() (string, error) {
	if p := os.Getenv("NGINX"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", fmt.Errorf("nginxtest: %s", notFound)
}

// Ports are the loopback ports a configuration's server blocks listen on,
// chosen free before nginx starts.
type Ports []int

// Server is a running nginx.
type Server struct {
	Dir   string // its prefix: configuration, logs, temporary files
	Ports Ports
}

// Start runs nginx with the http{} block body that conf makes: conf is a
// text/template given .Ports (n free loopback ports) and .Dir. The
// events block, pid, logs and temporary paths are set here, inside the
// test's directory. It waits until every port accepts.
func Start(tb testing.TB, n int, conf string) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	s := &Server{Dir: dir}
	for range n {
		s.Ports = append(s.Ports, freePort(tb))
	}
	var body bytes.Buffer
	if err := template.Must(template.New("nginx").Parse(conf)).Execute(&body, s); err != nil {
		tb.Fatal(err)
	}
	user := ""
	if os.Geteuid() == 0 {
		// Workers would otherwise run as nobody, who cannot write the
		// test's directory (proxy temporary files).
		user = "user root;\n"
	}
	full := fmt.Sprintf(`%[3]sworker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, body.String(), user)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("nginxtest: start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // fast shutdown
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	for _, p := range s.Ports {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		for deadline := time.Now().Add(10 * time.Second); ; {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-exited:
				log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
				tb.Fatalf("nginxtest: nginx exited (%v): %s %s", err, out.String(), strings.TrimSpace(string(log)))
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				tb.Fatalf("nginxtest: nginx does not accept on %s", addr)
			}
		}
	}
	return s
}

// Addr is the "127.0.0.1:port" of the i-th port.
func (s *Server) Addr(i int) string { return fmt.Sprintf("127.0.0.1:%d", s.Ports[i]) }

// freePort is a loopback port nothing listens on now (the kernel's
// choice: never one of the well-known service ports).
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
