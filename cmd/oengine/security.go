package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"oengine/server"
)

// securityFlags are serve's authentication, TLS and HTTP hardening flags
// (README "Security", docs/design.md §8).
type securityFlags struct {
	apiKeys, adminKeys         stringList
	apiKeyFile, adminKeyFile   *string
	allowUnauthenticated       *bool
	tlsCert, tlsKey, tlsClient *string
	maxSessionsPerKey          *int
	httpReadTimeout            *time.Duration
	httpWriteTimeout           *time.Duration
	httpIdleTimeout            *time.Duration
	httpMaxHeaderBytes         *int
	httpMaxConns               *int
}

func addSecurityFlags(fs *flag.FlagSet, def server.Config) *securityFlags {
	sf := &securityFlags{}
	fs.Var(&sf.apiKeys, "api-key", "an API `KEY` clients send as Authorization: Bearer KEY (repeatable; its principal is named key-<sha256 prefix>)")
	fs.Var(&sf.adminKeys, "admin-key", "an API `KEY` that may also use the admin operations (repeatable)")
	sf.apiKeyFile = fs.String("api-key-file", "", "`FILE` of name:key lines, one API key each (re-read on SIGHUP)")
	sf.adminKeyFile = fs.String("admin-key-file", "", "`FILE` of name:key lines, one admin key each (re-read on SIGHUP)")
	sf.allowUnauthenticated = fs.Bool("allow-unauthenticated", false, "serve without API keys on a non-loopback address")
	sf.tlsCert = fs.String("tls-cert", "", "PEM certificate chain `FILE` for both listeners (re-read on SIGHUP)")
	sf.tlsKey = fs.String("tls-key", "", "PEM private key `FILE` of --tls-cert")
	sf.tlsClient = fs.String("tls-client-ca", "", "PEM CA bundle `FILE`: require client certificates signed by it (mutual TLS)")
	sf.maxSessionsPerKey = fs.Int("max-sessions-per-key", 0, "live generation sessions per API key (0: a quarter of --max-sessions; -1: no cap)")
	sf.httpReadTimeout = fs.Duration("http-read-timeout", def.HTTPReadTimeout, "a whole HTTP request (headers and body) must arrive within this")
	sf.httpWriteTimeout = fs.Duration("http-write-timeout", def.HTTPWriteTimeout, "a non-streaming HTTP response must be written within this")
	sf.httpIdleTimeout = fs.Duration("http-idle-timeout", def.HTTPIdleTimeout, "idle keep-alive HTTP connections close after this")
	sf.httpMaxHeaderBytes = fs.Int("http-max-header-bytes", def.HTTPMaxHeaderBytes, "largest HTTP request header block")
	sf.httpMaxConns = fs.Int("http-max-conns", def.HTTPMaxConns, "HTTP connections open at once (more wait to be accepted)")
	return sf
}

// apply validates the flags and sets them on cfg. The returned reload
// re-reads the key files and the certificate (SIGHUP).
func (sf *securityFlags) apply(cfg *server.Config) (reload func() error, err error) {
	for name, v := range map[string]int{"--http-max-header-bytes": *sf.httpMaxHeaderBytes, "--http-max-conns": *sf.httpMaxConns} {
		if v < 0 {
			return nil, fmt.Errorf("%s must not be negative, got %d", name, v)
		}
	}
	for name, v := range map[string]time.Duration{"--http-read-timeout": *sf.httpReadTimeout,
		"--http-write-timeout": *sf.httpWriteTimeout, "--http-idle-timeout": *sf.httpIdleTimeout} {
		if v < 0 {
			return nil, fmt.Errorf("%s must not be negative, got %v", name, v)
		}
	}
	cfg.HTTPReadTimeout, cfg.HTTPWriteTimeout, cfg.HTTPIdleTimeout = *sf.httpReadTimeout, *sf.httpWriteTimeout, *sf.httpIdleTimeout
	cfg.HTTPMaxHeaderBytes, cfg.HTTPMaxConns = *sf.httpMaxHeaderBytes, *sf.httpMaxConns
	cfg.AllowUnauthenticated = *sf.allowUnauthenticated
	if cfg.Keys, err = sf.keys(); err != nil {
		return nil, err
	}
	var cert *certHolder
	if cfg.TLS, cert, err = sf.tlsConfig(); err != nil {
		return nil, err
	}
	reload = func() error {
		var errs []error
		if cert != nil {
			errs = append(errs, cert.load())
		}
		return errors.Join(errs...)
	}
	return reload, nil
}

// keys reads every key flag and file.
func (sf *securityFlags) keys() (*server.Keys, error) {
	var all []server.Key
	for _, k := range sf.apiKeys {
		all = append(all, server.Key{Name: server.KeyName(k), Secret: k})
	}
	for _, k := range sf.adminKeys {
		all = append(all, server.Key{Name: "admin-" + strings.TrimPrefix(server.KeyName(k), "key-"), Secret: k, Admin: true})
	}
	for _, f := range []struct {
		path  string
		admin bool
	}{{*sf.apiKeyFile, false}, {*sf.adminKeyFile, true}} {
		if f.path == "" {
			continue
		}
		r, err := os.Open(f.path)
		if err != nil {
			return nil, fmt.Errorf("reading keys: %w", err)
		}
		ks, err := server.ParseKeyFile(r, f.admin)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		all = append(all, ks...)
	}
	return server.NewKeys(all)
}

// tlsConfig builds the listeners' TLS from --tls-cert/--tls-key (and
// --tls-client-ca for mutual TLS); nil without them.
func (sf *securityFlags) tlsConfig() (*tls.Config, *certHolder, error) {
	if *sf.tlsCert == "" && *sf.tlsKey == "" {
		if *sf.tlsClient != "" {
			return nil, nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil, nil
	}
	if *sf.tlsCert == "" || *sf.tlsKey == "" {
		return nil, nil, errors.New("--tls-cert and --tls-key go together")
	}
	h := &certHolder{certFile: *sf.tlsCert, keyFile: *sf.tlsKey}
	if err := h.load(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return h.cert.Load(), nil },
	}
	if *sf.tlsClient != "" {
		pem, err := os.ReadFile(*sf.tlsClient)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate", *sf.tlsClient)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, h, nil
}

// certHolder is the serving certificate, replaced on reload.
type certHolder struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

func (h *certHolder) load() error {
	c, err := tls.LoadX509KeyPair(h.certFile, h.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	h.cert.Store(&c)
	return nil
}

// serveSignals runs srv until SIGTERM/SIGINT (a drain; a second signal
// exits at once with status 1) and reloads keys and certificates on SIGHUP.
func serveSignals(srv *server.Server, sf *securityFlags, reloadCert func() error, logger *slog.Logger) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		stopping := false
		for sig := range sigs {
			switch {
			case sig == syscall.SIGHUP:
				keys, err := sf.keys()
				if err == nil && srv.AuthEnabled() && !keys.Enabled() {
					err = errors.New("the new key set is empty: that would turn authentication off")
				}
				if err == nil {
					srv.SetKeys(keys)
					err = reloadCert()
				}
				if err != nil {
					logger.Error("reload failed; keeping the previous keys and certificate", "err", err)
				} else {
					logger.Info("reloaded keys and certificate")
				}
			case stopping:
				logger.Warn("second signal: exiting now", "signal", sig.String())
				os.Exit(1)
			default:
				stopping = true
				logger.Info("draining; send the signal again to exit at once", "signal", sig.String())
				cancel()
			}
		}
	}()
	return srv.Serve(ctx)
}
