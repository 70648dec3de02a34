// Package server exposes engines over the OpenEngine v1 gRPC contract
// (Inference, Control, grpc.health.v1, reflection) and an HTTP listener
// (/metrics, /healthz, /readyz). It is the only place where gRPC codes and
// HTTP statuses exist: engines report typed errors, the server maps them
// (docs/design.md §1).
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	pb "oengine/proto/openengine/v1"
)

// Server serves backends over gRPC and HTTP. Make it with New, run it with
// Serve (or Listen + Serve), stop it with Shutdown or by cancelling Serve's
// context.
type Server struct {
	ext        atomic.Pointer[ext]        // sessions + streaming extension (EnableSessions); nil when off
	kvSources  atomic.Pointer[[]KvSource] // more KV event feeds (AddKvEventSource)
	keys       atomic.Pointer[Keys]       // credentials; nil or empty: authentication off
	codec      *utf8Codec
	cfg        Config
	log        *slog.Logger
	models     []*Model
	byName     map[string]*Model // names and aliases
	instanceID string
	started    time.Time
	metrics    *Metrics

	grpc   *grpc.Server
	health *health.Server
	mux    *http.ServeMux
	http   *http.Server

	draining atomic.Bool
	inflight tracker // accepted Generate streams
	// stop is closed when shutdown begins; long-lived streams (KV events)
	// end on it.
	stop     chan struct{}
	stopOnce sync.Once

	mu       sync.Mutex // protects gl, hl and routes
	gl, hl   net.Listener
	routes   map[string]struct{} // HTTP patterns added with HandleHTTP
	shutdown chan struct{}       // closed when Shutdown finished
	shutOnce sync.Once
}

// New builds a server for one or more models; the first is the default
// model. Nothing listens until Listen or Serve.
func New(cfg Config, models ...Model) (*Server, error) {
	ms, byName, err := indexModels(models)
	if err != nil {
		return nil, err
	}
	if cfg.GRPCAddr == "" {
		return nil, errors.New("server: no gRPC address")
	}
	if cfg.EngineName == "" {
		cfg.EngineName = "oengine"
	}
	if cfg.DrainGrace < 0 {
		return nil, fmt.Errorf("server: negative drain grace %v", cfg.DrainGrace)
	}
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger,
		models:     ms,
		byName:     byName,
		instanceID: cfg.InstanceID,
		started:    time.Now(),
		metrics:    cfg.Metrics,
		stop:       make(chan struct{}),
		shutdown:   make(chan struct{}),
		routes:     map[string]struct{}{},
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.instanceID == "" {
		s.instanceID = newInstanceID()
	}
	if s.metrics == nil {
		s.metrics = NewMetrics()
	}
	s.metrics.attach(s)
	s.keys.Store(cfg.Keys)

	s.codec = newUTF8Codec()
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(s.codec),
		grpc.MaxRecvMsgSize(MaxRecvMsgBytes),
		grpc.ChainUnaryInterceptor(s.unaryUTF8, s.unaryAuth, s.unaryMeta),
		grpc.ChainStreamInterceptor(s.streamAuth, s.streamUTF8, s.streamMeta),
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	s.grpc = grpc.NewServer(opts...)
	pb.RegisterInferenceServer(s.grpc, &inferenceService{s: s})
	pb.RegisterControlServer(s.grpc, &controlService{s: s})
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	for _, svc := range []string{"", pb.Inference_ServiceDesc.ServiceName, pb.Control_ServiceDesc.ServiceName} {
		s.health.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(s.grpc)

	s.mux = http.NewServeMux()
	s.mux.Handle("GET /metrics", s.metrics.handler())
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /health", s.readyz) // vLLM's, llama.cpp's and TEI's path
	s.http = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.HTTPReadTimeout,
		WriteTimeout:      cfg.HTTPWriteTimeout,
		IdleTimeout:       cfg.HTTPIdleTimeout,
		MaxHeaderBytes:    cfg.HTTPMaxHeaderBytes,
		ConnContext:       cfg.HTTPConnContext,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if cfg.TLS != nil {
		s.http.TLSConfig = cfg.TLS.Clone()
	}
	return s, nil
}

// InstanceID is the per-process id reported in ServerInfo and LoadInfo.
func (s *Server) InstanceID() string { return s.instanceID }

// RegisterService adds another gRPC service (sessions, streaming input) to
// the listener; call it before Serve.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.grpc.RegisterService(desc, impl)
	s.health.SetServingStatus(desc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// HandleHTTP adds an HTTP route (net/http pattern syntax); call it before
// Serve. A pattern registered twice is an error.
func (s *Server) HandleHTTP(pattern string, h http.Handler) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.routes[pattern]; dup {
		return fmt.Errorf("server: HTTP route %q registered twice", pattern)
	}
	s.routes[pattern] = struct{}{}
	s.mux.Handle(pattern, h)
	return nil
}

// Track counts one accepted request of a protocol surface as in flight
// until the returned function is called: a drain waits for it.
func (s *Server) Track() (done func()) {
	s.inflight.add()
	var once sync.Once
	return func() { once.Do(s.inflight.done) }
}

// Logger is the server's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// Metrics are the server's Prometheus metrics.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Done is closed when the server has shut down.
func (s *Server) Done() <-chan struct{} { return s.shutdown }

// Draining reports whether the server stopped admitting new work.
func (s *Server) Draining() bool { return s.draining.Load() }

// Listen binds the listeners (once). Serve calls it; tests call it first to
// learn the addresses of ":0" listeners.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.shutdown:
		return errors.New("server: shut down")
	default:
	}
	if s.gl != nil {
		return nil
	}
	gl, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("server: grpc listen: %w", err)
	}
	if s.cfg.HTTPAddr != "" {
		hl, err := net.Listen("tcp", s.cfg.HTTPAddr)
		if err != nil {
			gl.Close()
			return fmt.Errorf("server: http listen: %w", err)
		}
		s.hl = hl
	}
	if err := s.protectedMode(gl, s.hl); err != nil {
		gl.Close()
		if s.hl != nil {
			s.hl.Close()
			s.hl = nil
		}
		return err
	}
	if s.hl != nil && s.cfg.HTTPMaxConns > 0 {
		s.hl = netutil.LimitListener(s.hl, s.cfg.HTTPMaxConns)
	}
	s.gl = gl
	return nil
}

// protectedMode refuses to serve without credentials on an address other
// hosts can reach, unless AllowUnauthenticated (docs/design.md §8).
func (s *Server) protectedMode(ls ...net.Listener) error {
	if s.AuthEnabled() || s.cfg.AllowUnauthenticated {
		return nil
	}
	for _, l := range ls {
		if l == nil {
			continue
		}
		if ta, ok := l.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
			return fmt.Errorf("server: refusing to listen on %s without authentication: other hosts could use the engine; "+
				"configure --api-key or --api-key-file, bind a loopback address (127.0.0.1), or pass --allow-unauthenticated", l.Addr())
		}
	}
	return nil
}

// GRPCAddr is the bound gRPC address ("" before Listen).
func (s *Server) GRPCAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gl == nil {
		return ""
	}
	return s.gl.Addr().String()
}

// HTTPAddr is the bound HTTP address ("" before Listen or without HTTP).
func (s *Server) HTTPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hl == nil {
		return ""
	}
	return s.hl.Addr().String()
}

// Serve listens (if needed) and serves until ctx is done, then drains with
// Config.DrainGrace and returns nil; or until a listener fails (that
// error), or until Shutdown is called elsewhere (nil).
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	gl, hl := s.gl, s.hl
	s.mu.Unlock()
	errc := make(chan error, 2)
	go func() { errc <- s.grpc.Serve(gl) }()
	if hl != nil {
		go func() {
			serve := s.http.Serve
			if s.cfg.TLS != nil {
				serve = func(l net.Listener) error { return s.http.ServeTLS(l, "", "") }
			}
			if err := serve(hl); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	s.log.Info("server: serving", "grpc", gl.Addr().String(), "http", s.HTTPAddr(),
		"instance_id", s.instanceID, "models", s.modelNames())
	select {
	case <-ctx.Done():
		s.log.Info("server: shutting down", "grace", s.cfg.DrainGrace)
		return s.Shutdown(s.cfg.DrainGrace)
	case <-s.shutdown:
		return nil
	case err := <-errc:
		if err == nil {
			<-s.shutdown
			return nil
		}
		_ = s.Shutdown(0)
		return fmt.Errorf("server: %w", err)
	}
}

// Shutdown drains: new requests get UNAVAILABLE (DRAINING) and health says
// DRAINING; running requests may finish for up to grace, then the rest
// are cancelled; then the listeners close. Safe to call twice.
func (s *Server) Shutdown(grace time.Duration) error {
	first := false
	s.shutOnce.Do(func() {
		first = true
		s.shutdownNow(grace)
		close(s.shutdown)
	})
	if !first {
		<-s.shutdown
	}
	return nil
}

// closeBudget bounds the close after the drain grace: whatever clients
// do (a stalled reader blocks its handler in Send), the server is down
// within grace + closeBudget.
const closeBudget = 900 * time.Millisecond

func (s *Server) shutdownNow(grace time.Duration) {
	s.startDrain()
	drained := s.inflight.wait(grace)
	end := time.Now().Add(closeBudget)
	left := func(part float64) time.Duration { return time.Duration(float64(time.Until(end)) * part) }
	if !drained {
		n := 0
		for _, m := range s.models {
			n += m.Backend.AbortAll()
		}
		s.log.Warn("server: drain grace over, cancelled running requests", "requests", n)
		s.inflight.wait(left(0.4))
	}
	s.stopOnce.Do(func() { close(s.stop) })
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(left(0.5)):
		s.grpc.Stop() // closes every connection: blocked handlers return
		<-done
	}
	ctx, cancel := context.WithTimeout(context.Background(), left(0.8))
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		s.http.Close()
	}
	// Listeners that Serve never took over are closed here (closing twice
	// is harmless).
	s.mu.Lock()
	for _, l := range []net.Listener{s.gl, s.hl} {
		if l != nil {
			_ = l.Close()
		}
	}
	s.mu.Unlock()
	s.log.Info("server: stopped")
}

// Drain stops admitting new work (health reports DRAINING) without
// shutting down; running requests go on. Shutdown drains too.
func (s *Server) Drain() { s.startDrain() }

// startDrain stops admitting work everywhere.
func (s *Server) startDrain() {
	if s.draining.Swap(true) {
		return
	}
	s.health.Shutdown() // every service NOT_SERVING
	for _, m := range s.models {
		m.Backend.Drain()
	}
}

// modelNames are the listed models' served names (supported_models).
func (s *Server) modelNames() []string {
	out := make([]string, 0, len(s.models))
	for _, m := range s.listed() {
		out = append(out, m.Name)
	}
	return out
}

func newInstanceID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("oengine-%d", time.Now().UnixNano())
	}
	return "oengine-" + hex.EncodeToString(b[:])
}

// tracker counts in-flight work and lets a shutdown wait for zero.
type tracker struct {
	mu   sync.Mutex // protects n and zero
	n    int
	zero chan struct{} // closed when n drops to 0; nil while n == 0
}

func (t *tracker) add() {
	t.mu.Lock()
	if t.n == 0 {
		t.zero = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	t.n--
	if t.n == 0 {
		close(t.zero)
		t.zero = nil
	}
	t.mu.Unlock()
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// wait blocks until the count is zero or d passed; it reports whether the
// count reached zero.
func (t *tracker) wait(d time.Duration) bool {
	t.mu.Lock()
	z := t.zero
	t.mu.Unlock()
	if z == nil {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-z:
		return true
	case <-timer.C:
		return false
	}
}
