package db

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// REDIS_URL names one Redis server, or a Redis Sentinel deployment whose
// current master the client follows through a failover:
//
//	redis://[user:password@]host:port/db             one server (rediss:// for TLS)
//	redis-sentinel://[user:password@]s1:26379,s2:26379/master[/db]
//	redis://[user:password@]s1:26379/db?master_name=master&addr=s2:26379
//
// In the redis-sentinel form the user and password are the master's; the
// sentinels' own, if they need any, go in sentinel_username and
// sentinel_password query parameters. The last form is the one go-redis
// documents (ParseFailoverURL), where user and password are the
// sentinels'.

// redisTimeouts are the dial, read and write timeouts of every Redis
// connection: Redis is a fast path, and a slow one is worse than none.
const redisTimeout = 2 * time.Second

// CheckRedisURL reports whether raw is a REDIS_URL Flint can use.
func CheckRedisURL(raw string) error {
	c, err := newRedisClient(raw)
	if err != nil {
		return err
	}
	return c.Close()
}

// newRedisClient makes the client REDIS_URL describes, without connecting.
func newRedisClient(raw string) (*redis.Client, error) {
	if rest, ok := strings.CutPrefix(raw, "redis-sentinel://"); ok {
		opt, err := parseSentinelURL(rest)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		return redis.NewFailoverClient(sentinelTimeouts(opt)), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("REDIS_URL: not a URL; want redis://host:port/db, redis-sentinel://host:port,host:port/master, or empty for PostgreSQL-only mode")
	}
	switch {
	case (u.Scheme == "redis" || u.Scheme == "rediss") && u.Query().Has("master_name"):
		opt, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %s", redactRedis(err, u))
		}
		return redis.NewFailoverClient(sentinelTimeouts(opt)), nil
	case u.Scheme == "redis" || u.Scheme == "rediss" || u.Scheme == "unix":
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %s", redactRedis(err, u))
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = redisTimeout, redisTimeout, redisTimeout
		opt.MaxRetries = 1
		opt.Dialer = redisDialer(opt.TLSConfig)
		return redis.NewClient(opt), nil
	}
	return nil, fmt.Errorf("REDIS_URL: scheme %q: want redis://host:port/db, redis-sentinel://host:port,host:port/master, or empty for PostgreSQL-only mode", u.Scheme)
}

func sentinelTimeouts(opt *redis.FailoverOptions) *redis.FailoverOptions {
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = redisTimeout, redisTimeout, redisTimeout
	opt.MaxRetries = 1
	opt.Dialer = redisDialer(opt.TLSConfig)
	return opt
}

// redisDialer dials with Flint's keepalives and TCP_USER_TIMEOUT (Dialer,
// db/netfaults.go), over TLS when tlsConfig is set, as go-redis's own
// dialer would.
func redisDialer(tlsConfig *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := Dialer()
		d.Timeout = redisTimeout
		if tlsConfig == nil {
			return d.DialContext(ctx, network, addr)
		}
		td := &tls.Dialer{NetDialer: d, Config: tlsConfig}
		return td.DialContext(ctx, network, addr)
	}
}

// parseSentinelURL reads what follows redis-sentinel://:
// [user:password@]host:port[,host:port...]/master[/db][?query]. The host
// list is split by hand: net/url refuses several hosts in one URL.
func parseSentinelURL(rest string) (*redis.FailoverOptions, error) {
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	hosts := authority
	var userinfo *url.Userinfo
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		hosts = authority[i+1:]
		ui, err := url.Parse("redis://" + authority[:i+1] + "h")
		if err != nil || ui.User == nil {
			return nil, errors.New("redis-sentinel:// user and password are not readable (percent-encode special characters)")
		}
		userinfo = ui.User
	}
	u, err := url.Parse("redis-sentinel://h" + tail)
	if err != nil {
		return nil, errors.New("redis-sentinel:// path or query is not readable")
	}
	u.User = userinfo
	opt := &redis.FailoverOptions{}
	for _, hp := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			host, port = hp, "26379"
		}
		if host == "" {
			return nil, fmt.Errorf("sentinel address %q has no host", hp)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("sentinel address %q has a bad port", hp)
		}
		opt.SentinelAddrs = append(opt.SentinelAddrs, net.JoinHostPort(host, port))
	}
	if len(opt.SentinelAddrs) == 0 {
		return nil, errors.New("redis-sentinel:// needs at least one sentinel host:port")
	}
	parts := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
	q := u.Query()
	if len(parts) > 0 {
		opt.MasterName = parts[0]
	}
	if m := q.Get("master_name"); m != "" {
		opt.MasterName = m
	}
	if opt.MasterName == "" {
		return nil, errors.New("redis-sentinel:// needs the master's name: redis-sentinel://host:port/master")
	}
	dbNum := q.Get("db")
	if len(parts) > 1 {
		dbNum = parts[1]
	}
	if len(parts) > 2 {
		return nil, errors.New("redis-sentinel:// path is /master or /master/db")
	}
	if dbNum != "" {
		n, err := strconv.Atoi(dbNum)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("database number %q is not a whole number", dbNum)
		}
		opt.DB = n
	}
	if u.User != nil {
		opt.Username = u.User.Username()
		opt.Password, _ = u.User.Password()
	}
	opt.SentinelUsername = q.Get("sentinel_username")
	opt.SentinelPassword = q.Get("sentinel_password")
	for k := range q {
		switch k {
		case "master_name", "db", "sentinel_username", "sentinel_password":
		default:
			return nil, fmt.Errorf("redis-sentinel:// does not know the parameter %q", k)
		}
	}
	return opt, nil
}

// redactRedis is err's message without the URL's password.
func redactRedis(err error, u *url.URL) string {
	msg := err.Error()
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}
