// Package redisurl turns the --redis URL into the options of the one
// rueidis client that history, sessions, presence, grants, events and
// pub/sub share, so that every store reaches the same Redis the same way:
// one instance, a Sentinel-monitored master, or a Redis Cluster.
//
// Accepted forms:
//
//	redis://[:password@]host:port[/db][?addr=host2:port...]   one Redis, or any node of a Cluster
//	rediss://...                                             the same over TLS
//	redis+sentinel://[:password@]host:26379,host2:26379/mymaster[?db=N&sentinel_password=P]
//
// In the Sentinel form the hosts are the sentinels (port 26379 when left
// out) and the path names the master set. The password in the userinfo is
// the master's (requirepass); a sentinel with its own requirepass takes
// sentinel_password. rueidis's own form, redis://sentinel:26379?master_set=
// mymaster&addr=..., is accepted too.
package redisurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// SentinelScheme starts a Sentinel URL.
const SentinelScheme = "redis+sentinel"

// topologyRefresh is how often a Sentinel client asks the sentinels where
// the master is, besides following their +switch-master events: a missed
// event would otherwise leave it on a demoted master.
const topologyRefresh = 2 * time.Second

// Options returns the client options for raw. Errors never repeat the URL,
// which may hold a password.
func Options(raw string) (rueidis.ClientOption, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return rueidis.ClientOption{}, errors.New("redisurl: not a URL (want redis://, rediss:// or redis+sentinel://)")
	}
	if scheme != SentinelScheme {
		o, err := rueidis.ParseURL(raw)
		if err != nil {
			return rueidis.ClientOption{}, fmt.Errorf("redisurl: %w", redact(err))
		}
		if o.Sentinel.MasterSet != "" {
			o.Sentinel.TopologyRefreshInterval = topologyRefresh
		}
		return o, nil
	}
	return sentinel(rest)
}

func sentinel(rest string) (rueidis.ClientOption, error) {
	var o rueidis.ClientOption
	rest, query, _ := strings.Cut(rest, "?")
	hosts, master, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		user, pass, hasPass := strings.Cut(hosts[:at], ":")
		var err error
		if o.Username, err = url.PathUnescape(user); err != nil {
			return o, errors.New("redisurl: bad user name escape")
		}
		if hasPass {
			if o.Password, err = url.PathUnescape(pass); err != nil {
				return o, errors.New("redisurl: bad password escape")
			}
		}
		hosts = hosts[at+1:]
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			continue
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = strings.Trim(h, "[]"), "26379"
		}
		if host == "" {
			return o, fmt.Errorf("redisurl: sentinel address %q has no host", h)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return o, fmt.Errorf("redisurl: sentinel address %q has a bad port", h)
		}
		o.InitAddress = append(o.InitAddress, net.JoinHostPort(host, port))
	}
	if len(o.InitAddress) == 0 {
		return o, errors.New("redisurl: redis+sentinel:// names no sentinel")
	}
	master, err := url.PathUnescape(strings.Trim(master, "/"))
	if err != nil || master == "" || strings.Contains(master, "/") {
		return o, errors.New("redisurl: redis+sentinel:// needs the master set name as its path (/mymaster)")
	}
	o.Sentinel.MasterSet = master
	o.Sentinel.TopologyRefreshInterval = topologyRefresh
	q, err := url.ParseQuery(query)
	if err != nil {
		return o, errors.New("redisurl: bad query")
	}
	for k, v := range q {
		val := v[len(v)-1]
		switch k {
		case "db":
			if o.SelectDB, err = strconv.Atoi(val); err != nil || o.SelectDB < 0 {
				return o, fmt.Errorf("redisurl: bad db %q", val)
			}
		case "sentinel_password":
			o.Sentinel.Password = val
		case "sentinel_username":
			o.Sentinel.Username = val
		case "dial_timeout":
			if o.Dialer.Timeout, err = time.ParseDuration(val); err != nil {
				return o, fmt.Errorf("redisurl: bad dial_timeout %q", val)
			}
			o.Sentinel.Dialer.Timeout = o.Dialer.Timeout
		default:
			return o, fmt.Errorf("redisurl: unknown parameter %q", k)
		}
	}
	return o, nil
}

// redact drops rueidis's quoting of URL parts, which may hold a password,
// keeping what kind of error it was.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("bad URL: %w", ue.Err)
	}
	return err
}
