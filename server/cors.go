package server

import (
	"net/http"
	"slices"
	"strings"
)

// CORS decides browser requests from other origins to the HTTP routes
// (--cors-origin, docs/api.md "Browsers and CORS"): an allowed origin's
// requests get Access-Control-Allow-Origin and their preflights are
// answered; a foreign origin's are refused by the route, so a page on
// another site cannot drive the server through a visitor's browser.
type CORS struct {
	// Origins are the allowed origins; "*" allows any.
	Origins []string
}

// Check sets the CORS response headers when r's Origin is allowed. origin
// is "" for a request without one and for the server's own origin (a
// page it serves, such as the web console: browsers send Origin on a
// same-origin POST too); ok reports whether a foreign origin is allowed.
func (c CORS) Check(w http.ResponseWriter, r *http.Request) (origin string, ok bool) {
	origin = r.Header.Get("Origin")
	if origin == "" || sameOrigin(r, origin) {
		return "", false
	}
	w.Header().Add("Vary", "Origin")
	if !slices.Contains(c.Origins, origin) && !slices.Contains(c.Origins, "*") {
		return origin, false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After")
	return origin, true
}

// Preflight answers the OPTIONS preflight of an allowed origin (Check
// first): 204 with methods and the request headers the browser asks for
// (clients add their own, such as the SDKs' X-Stainless-* and Anthropic's
// anthropic-version). For an origin that is not allowed it writes nothing
// and reports false: the caller refuses it in its own form.
func (c CORS) Preflight(w http.ResponseWriter, r *http.Request, ok bool, methods string) bool {
	if !ok {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", methods)
	asked := r.Header.Get("Access-Control-Request-Headers")
	if asked == "" {
		asked = "Content-Type, Authorization"
	}
	h.Set("Access-Control-Allow-Headers", asked)
	h.Set("Access-Control-Max-Age", "600")
	h.Add("Vary", "Access-Control-Request-Headers")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// sameOrigin reports whether origin is the server's own, as the request
// reached it.
func sameOrigin(r *http.Request, origin string) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return r.Host != "" && strings.EqualFold(origin, scheme+r.Host)
}
