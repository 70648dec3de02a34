package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	pb "oengine/proto/openengine/v1"
)

// Principal is who made a call: the name of the API key it presented.
// Requests, sessions and streams belong to the principal that created
// them (docs/design.md §8). Without keys configured every call is the
// anonymous principal, which has every right.
type Principal struct {
	Name  string // key name; "" for the anonymous principal
	Admin bool   // may use the admin operations
}

// Key is one credential: a name (the principal) and its secret.
type Key struct {
	Name   string
	Secret string
	Admin  bool
}

// MaxKeyNameBytes bounds a key's name (it prefixes the ids of its
// requests and sessions).
const MaxKeyNameBytes = 64

// Keys is a set of credentials. A nil *Keys (or one with no key) means
// authentication is off.
type Keys struct {
	keys []hashedKey
}

type hashedKey struct {
	digest    [32]byte // sha256 of the secret
	principal Principal
}

// NewKeys checks and indexes keys: names and secrets non-empty, without
// whitespace, names unique.
func NewKeys(keys []Key) (*Keys, error) {
	out := &Keys{}
	names := map[string]bool{}
	digests := map[[32]byte]bool{}
	for i, k := range keys {
		switch {
		case k.Secret == "":
			return nil, fmt.Errorf("server: key %d is empty", i+1)
		case strings.ContainsFunc(k.Secret, isSpaceOrControl):
			return nil, fmt.Errorf("server: key %q contains whitespace or a control character", k.Name)
		case k.Name == "" || len(k.Name) > MaxKeyNameBytes || strings.ContainsFunc(k.Name, isSpaceOrControl) || strings.Contains(k.Name, scopeSep):
			return nil, fmt.Errorf("server: key %d: a name is 1 to %d bytes without whitespace, control characters or %q", i+1, MaxKeyNameBytes, scopeSep)
		case names[k.Name]:
			return nil, fmt.Errorf("server: key name %q used twice", k.Name)
		}
		d := sha256.Sum256([]byte(k.Secret))
		if digests[d] {
			return nil, fmt.Errorf("server: key %q has the same secret as another key", k.Name)
		}
		names[k.Name], digests[d] = true, true
		out.keys = append(out.keys, hashedKey{digest: d, principal: Principal{Name: k.Name, Admin: k.Admin}})
	}
	return out, nil
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// KeyName is the principal name of a key given without one (--api-key):
// "key-" and the first 8 hex digits of its SHA-256, stable and not the
// secret.
func KeyName(secret string) string {
	d := sha256.Sum256([]byte(secret))
	return "key-" + hex.EncodeToString(d[:4])
}

// ParseKeyFile reads `name:key` lines (--api-key-file); blank lines and
// lines starting with # are skipped.
func ParseKeyFile(r io.Reader, admin bool) ([]Key, error) {
	var out []Key
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secret, ok := strings.Cut(line, ":")
		if !ok || name == "" || secret == "" {
			return nil, fmt.Errorf("server: key file line %d: want name:key", n)
		}
		out = append(out, Key{Name: name, Secret: secret, Admin: admin})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("server: key file: %w", err)
	}
	return out, nil
}

// Enabled reports whether calls must authenticate.
func (k *Keys) Enabled() bool { return k != nil && len(k.keys) > 0 }

// lookup finds the principal of a presented secret. Every key is compared
// (in constant time over digests), so the time taken does not depend on
// which key matched.
func (k *Keys) lookup(secret string) (Principal, bool) {
	d := sha256.Sum256([]byte(secret))
	var found Principal
	ok := 0
	for _, hk := range k.keys {
		if subtle.ConstantTimeCompare(d[:], hk.digest[:]) == 1 {
			found, ok = hk.principal, 1
		}
	}
	return found, ok == 1
}

// SetKeys replaces the credentials (a SIGHUP reload of --api-key-file).
// nil or an empty set turns authentication off.
func (s *Server) SetKeys(k *Keys) { s.keys.Store(k) }

// AuthEnabled reports whether calls must present a key.
func (s *Server) AuthEnabled() bool { return s.keys.Load().Enabled() }

type principalKey struct{}

// PrincipalFrom is the principal of a call (the anonymous principal when
// authentication is off or the call carried none).
func PrincipalFrom(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p
	}
	return Principal{Admin: true}
}

func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// authenticate resolves a bearer credential ("Bearer KEY") to a principal.
func (s *Server) authenticate(header string) (Principal, *apiError) {
	keys := s.keys.Load()
	if !keys.Enabled() {
		return Principal{Admin: true}, nil
	}
	scheme, secret, ok := strings.Cut(header, " ")
	if header == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		return Principal{}, unauthenticated("missing credentials: send `authorization: Bearer KEY`")
	}
	p, ok := keys.lookup(strings.TrimSpace(secret))
	if !ok {
		return Principal{}, unauthenticated("invalid API key")
	}
	return p, nil
}

// httpCredentials is an HTTP request's Authorization header, or its
// X-Api-Key as a bearer token when it has no Authorization.
func httpCredentials(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		return h
	}
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return "Bearer " + k
	}
	return ""
}

func unauthenticated(msg string) *apiError {
	return &apiError{grpc: codes.Unauthenticated, reason: reasonUnauthenticated, engine: pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT,
		msg: "server: " + msg}
}

func adminRequired(what string) *apiError {
	return &apiError{grpc: codes.PermissionDenied, reason: reasonAdminRequired, engine: pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT,
		msg: "server: " + what + " needs an admin key"}
}

// requireAdmin refuses a non-admin principal.
func requireAdmin(ctx context.Context, what string) error {
	if PrincipalFrom(ctx).Admin {
		return nil
	}
	return adminRequired(what).err()
}

// openMethods need no credentials (docs/design.md §8: health stays open).
func openMethod(full string) bool {
	return strings.HasPrefix(full, "/grpc.health.v1.Health/") || full == "/openengine.v1.Control/Health"
}

// adminMethods are admin-only whole RPCs; Abort{all_requests} is checked in
// its handler.
var adminMethods = map[string]string{
	"/openengine.v1.Control/SubscribeKvEvents": "SubscribeKvEvents",
	"/openengine.v1.Control/GetKvEventSources": "GetKvEventSources",
	"/openengine.v1.Control/LoadLora":          "LoadLora",
	"/openengine.v1.Control/UnloadLora":        "UnloadLora",
}

// grpcAuth authenticates a call from its metadata, before anything else
// runs, and checks the admin-only methods.
func (s *Server) grpcAuth(ctx context.Context, method string) (context.Context, error) {
	if openMethod(method) {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var header string
	if v := md.Get("authorization"); len(v) > 0 {
		header = v[0]
	}
	p, aerr := s.authenticate(header)
	if aerr != nil {
		s.metrics.rejected(aerr.reason)
		return nil, aerr.err()
	}
	if what, ok := adminMethods[method]; ok && !p.Admin {
		s.metrics.rejected(reasonAdminRequired)
		return nil, adminRequired(what).err()
	}
	return withPrincipal(ctx, p), nil
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.grpcAuth(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.grpcAuth(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, &metaStream{ServerStream: ss, ctx: ctx})
}

// Authenticated wraps an HTTP handler of a protocol surface: without a
// valid `Authorization: Bearer KEY` or `X-Api-Key: KEY` (Anthropic's
// clients send that one) when keys are configured, it answers 401 before
// the handler runs; the handler finds the principal with
// PrincipalFrom(r.Context()).
func (s *Server) Authenticated(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, aerr := s.authenticate(httpCredentials(r))
		if aerr != nil {
			s.metrics.rejected(aerr.reason)
			w.Header().Set("WWW-Authenticate", `Bearer realm="oengine"`)
			writeJSON(w, http.StatusUnauthorized, httpError{Error: httpErrorDetail{
				Code: "unauthenticated", Type: "authentication_error", Message: aerr.msg}})
			return
		}
		h.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// httpError is the JSON error body of the server's own HTTP refusals: the
// SSE route's shape ({"error": {code, message}}) with OpenAI's `type`.
type httpError struct {
	Error httpErrorDetail `json:"error"`
}

type httpErrorDetail struct {
	Code    string `json:"code"`
	Type    string `json:"type,omitempty"`
	Message string `json:"message"`
}

// scopeSep joins a principal's name and a client-chosen id. Client ids
// are printable ASCII (checkClientID) and key names may not contain it, so
// no id of one principal can be written to look like another's.
const scopeSep = "\u00a7" // §

// Scope is the internal id of a client-chosen request or session id:
// with authentication on, ids live in the namespace of their principal,
// so one principal neither reaches nor learns of another's.
func (p Principal) Scope(id string) string {
	if p.Name == "" || id == "" {
		return id
	}
	return p.Name + scopeSep + id
}

// Unscope is the client's id of an internal id of p ("" when the id is
// not p's).
func (p Principal) Unscope(id string) (string, bool) {
	if p.Name == "" {
		return id, !strings.Contains(id, scopeSep)
	}
	rest, ok := strings.CutPrefix(id, p.Name+scopeSep)
	if !ok || strings.Contains(rest, scopeSep) {
		return "", false
	}
	return rest, true
}

// clientID is the client's form of an internal id of p.
func (p Principal) clientID(internal string) string {
	if id, ok := p.Unscope(internal); ok {
		return id
	}
	return internal
}

// MaxClientIDBytes caps client-chosen request and session ids
// (docs/design.md §8).
const MaxClientIDBytes = 256

// checkClientID enforces the rule of free-form ids: at most 256 bytes of
// printable ASCII.
func checkClientID(field, id string) *apiError {
	if len(id) > MaxClientIDBytes {
		return invalidf("%s is %d bytes, at most %d", field, len(id), MaxClientIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return invalidf("%s has a byte 0x%02x at %d: only printable ASCII is allowed", field, c, i)
		}
	}
	return nil
}

// requestID checks a client's request id and scopes it to p. A named
// principal that gives none gets a minted one (so that Abort can reach it).
func requestID(id string, p Principal) (string, *apiError) {
	if aerr := checkClientID("request_id", id); aerr != nil {
		return "", aerr
	}
	if id == "" && p.Name != "" {
		id = "req-" + randomHex(16)
	}
	return p.Scope(id), nil
}

// sessionID is requestID for session ids ("" without a principal: the
// session manager mints one).
func sessionID(id string, p Principal) (string, *apiError) {
	if aerr := checkClientID("session_id", id); aerr != nil {
		return "", aerr
	}
	if id == "" && p.Name != "" {
		id = "gs-" + randomHex(16)
	}
	return p.Scope(id), nil
}

// randomHex is n random bytes in hex (crypto/rand).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// Authenticate resolves the principal of an HTTP request from its
// `Authorization: Bearer KEY` (or `X-Api-Key: KEY`) header; the error
// classifies as 401 `unauthenticated` (Classify). Surfaces that must answer something before
// authenticating (a CORS preflight) call it themselves; the others wrap
// their handler with Authenticated.
func (s *Server) Authenticate(r *http.Request) (Principal, error) {
	p, aerr := s.authenticate(httpCredentials(r))
	if aerr != nil {
		s.metrics.rejected(aerr.reason)
		return Principal{}, aerr
	}
	return p, nil
}
