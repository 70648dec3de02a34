// Package web serves the web console: a chat page over a generation
// session with on-demand translation of completed thinking blocks
// (docs/web.md). The page is plain HTML, CSS and JavaScript embedded in the
// binary (no build step, no network at run time); it talks to the routes
// the other protocol surfaces register (the OpenAI-compatible API and
// sessions over HTTP of server/openai, the SSE route of server/sse) and to
// one JSON route of its own, GET /web/api/info, for the server, model and
// live-load figures that are otherwise gRPC-only (Control.GetLoad). It uses
// only the server package's exported API.
package web

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"time"

	"oengine/server"
)

//go:embed static
var static embed.FS

// Routes Enable registers.
const (
	// IndexPattern serves the page itself.
	IndexPattern = "GET /{$}"
	// AssetsPattern serves the page's scripts and styles.
	AssetsPattern = "GET /web/"
	// InfoPattern is the page's JSON route: server, models and load.
	InfoPattern = "GET /web/api/info"
)

// Config configures the console.
type Config struct {
	// Version is the engine version shown on the page.
	Version string
	// Now is the clock of the info route's server time; nil: time.Now.
	Now func() time.Time
}

// contentSecurityPolicy keeps the page to its own origin: no inline script,
// no third-party resource.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Enable registers the page at / and its assets under /web/ on the
// server's HTTP listener; call it once, before Serve. The static files are
// open (docs/design.md §8: the page's static files need no key); the info
// route authenticates like every API route.
func Enable(s *server.Server, cfg Config) error {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		return err
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		return err
	}
	assets := http.StripPrefix("/web/", http.FileServerFS(sub))
	if err := s.HandleHTTP(IndexPattern, headers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(index)
	}))); err != nil {
		return err
	}
	if err := s.HandleHTTP(AssetsPattern, headers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		assets.ServeHTTP(w, r)
	}))); err != nil {
		return err
	}
	ir := &infoRoute{s: s, cfg: cfg}
	return s.HandleHTTP(InfoPattern, headers(s.Authenticated(ir)))
}

// headers sets the security headers of every console response.
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// Info is the body of GET /web/api/info.
type Info struct {
	InstanceID string `json:"instance_id"`
	Version    string `json:"version"`
	// NowUnixMs is the server's clock, so the page counts leases down
	// against it rather than against the browser's.
	NowUnixMs   int64       `json:"now_unix_ms"`
	AuthEnabled bool        `json:"auth_enabled"`
	Sessions    bool        `json:"sessions"` // generation sessions are enabled
	Draining    bool        `json:"draining"`
	Models      []ModelInfo `json:"models"`
	Load        Load        `json:"load"`
}

// ModelInfo is one served model.
type ModelInfo struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases"`
	// Auxiliary: a --fast-model, served for the SSE route but not listed
	// to routers (the page does not offer it for sessions).
	Auxiliary  bool `json:"auxiliary"`
	ContextLen int  `json:"context_len"`
	// EmbeddingsOnly: an encoder, which generates nothing (no chat);
	// Rerank: it has a classification head (POST /v1/rerank).
	EmbeddingsOnly  bool `json:"embeddings_only"`
	Rerank          bool `json:"rerank"`
	MaxOutputTokens int  `json:"max_output_tokens"`
	PageSize        int  `json:"page_size"`
	// Session figures (0 when sessions are off).
	DefaultLeaseMs    int64 `json:"default_lease_ms"`
	MaxLeaseMs        int64 `json:"max_lease_ms"`
	MaxRetainedTokens int   `json:"max_retained_tokens"`
	Load              Load  `json:"load"`
}

// Load is a live snapshot: Control.GetLoad's figures.
type Load struct {
	Running      int `json:"running"`
	Waiting      int `json:"waiting"`
	KVPagesUsed  int `json:"kv_pages_used"`
	KVPagesTotal int `json:"kv_pages_total"`
	KVPinned     int `json:"kv_pages_pinned"`
	LiveSessions int `json:"live_sessions"`
}

type infoRoute struct {
	s   *server.Server
	cfg Config
}

func (ir *infoRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, ir.info())
}

// info gathers the figures. Live sessions are counted over all principals,
// like GetLoad's active_kv_sessions.
func (ir *infoRoute) info() Info {
	s := ir.s
	mgr := s.Sessions()
	out := Info{InstanceID: s.InstanceID(), Version: ir.cfg.Version, NowUnixMs: ir.cfg.Now().UnixMilli(),
		AuthEnabled: s.AuthEnabled(), Sessions: mgr != nil, Draining: s.Draining(), Models: []ModelInfo{}}
	if mgr != nil {
		out.Load.LiveSessions = len(mgr.List())
	}
	for _, m := range s.Models() {
		lim := m.Limits()
		l := m.Backend.Load()
		mi := ModelInfo{Name: m.Name, Aliases: append([]string{}, m.Aliases...), Auxiliary: m.Auxiliary, ContextLen: lim.ContextLen,
			EmbeddingsOnly: lim.EmbeddingsOnly, Rerank: lim.RankOutputs > 0,
			MaxOutputTokens: lim.MaxOutputTokens, PageSize: lim.PageSize,
			Load: Load{Running: l.Running, Waiting: l.Waiting, KVPagesUsed: l.Pages.Used(), KVPagesTotal: l.Pages.Total,
				KVPinned: l.Pages.Pinned}}
		if mgr != nil {
			if c, ok := mgr.Capabilities(m.Name); ok {
				mi.DefaultLeaseMs, mi.MaxLeaseMs = c.DefaultLease.Milliseconds(), c.MaxLease.Milliseconds()
				mi.MaxRetainedTokens = c.MaxRetainedTokens
			}
		}
		out.Load.Running += mi.Load.Running
		out.Load.Waiting += mi.Load.Waiting
		out.Load.KVPagesUsed += mi.Load.KVPagesUsed
		out.Load.KVPagesTotal += mi.Load.KVPagesTotal
		out.Load.KVPinned += mi.Load.KVPinned
		out.Models = append(out.Models, mi)
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
