package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "oengine/proto/openengine/v1"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files for grpcurl and curl.
type testPKI struct {
	dir            string
	caFile         string
	pool           *x509.CertPool
	server, client tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oengine test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p := &testPKI{dir: dir, caFile: filepath.Join(dir, "ca.pem"), pool: x509.NewCertPool(),
		server: leaf(2, x509.ExtKeyUsageServerAuth), client: leaf(3, x509.ExtKeyUsageClientAuth)}
	p.pool.AddCert(ca)
	if err := os.WriteFile(p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *testPKI) serverTLS(mutual bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS12}
	if mutual {
		c.ClientCAs, c.ClientAuth = p.pool, tls.RequireAndVerifyClientCert
	}
	return c
}

// serveFake serves a fake model with cfg (setup runs before Listen) until
// the test ends; unlike startServer it dials nothing, so cfg may use TLS.
func serveFake(t *testing.T, cfg Config, setup func(*Server)) *Server {
	t.Helper()
	s, err := New(cfg, Model{Backend: newFake(t, "m")})
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(s)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(context.Background()) }()
	t.Cleanup(func() { _ = s.Shutdown(time.Second) })
	return s
}

// TestTLS is issue 17 point 1 (TLS): both listeners speak TLS, HTTP/2 by
// ALPN, checked with grpc-go, net/http and grpcurl -cacert; plaintext is
// refused (before the fix there was no TLS at all).
func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	cfg := testConfig()
	cfg.TLS = pki.serverTLS(false)
	s := serveFake(t, cfg, nil)

	creds := credentials.NewTLS(&tls.Config{RootCAs: pki.pool})
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pb.NewControlClient(conn).GetServerInfo(ctxT(t), &pb.GetServerInfoRequest{}); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}, ForceAttemptHTTP2: true}}
	resp, err := client.Get("https://" + s.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatalf("HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("HTTPS /healthz: %d over HTTP/%d, want 200 over HTTP/2", resp.StatusCode, resp.ProtoMajor)
	}
	if resp, err := http.Get("http://" + s.HTTPAddr() + "/healthz"); err == nil && resp.StatusCode == 200 {
		t.Fatal("plaintext HTTP answered on the TLS listener")
	}
	if path, err := exec.LookPath("grpcurl"); err == nil {
		out, err := exec.Command(path, "-cacert", pki.caFile, "-d", "{}", s.GRPCAddr(), "openengine.v1.Control/GetServerInfo").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "schemaRevision") {
			t.Fatalf("grpcurl -cacert: %v\n%s", err, out)
		}
	} else if os.Getenv("OENGINE_REQUIRE_GRPCURL") != "" {
		t.Fatal("grpcurl is required")
	}
}

// TestMutualTLS: with a client CA only clients with a certificate it
// signed get through.
func TestMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	cfg := testConfig()
	cfg.TLS = pki.serverTLS(true)
	s := serveFake(t, cfg, nil)
	call := func(certs []tls.Certificate) error {
		creds := credentials.NewTLS(&tls.Config{RootCAs: pki.pool, Certificates: certs})
		conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = pb.NewControlClient(conn).GetServerInfo(ctxT(t), &pb.GetServerInfoRequest{})
		return err
	}
	if err := call(nil); err == nil {
		t.Fatal("a client without a certificate got through")
	}
	if err := call([]tls.Certificate{pki.client}); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
}

// TestProtectedMode is issue 17 point 1: without keys a server refuses a
// non-loopback address unless AllowUnauthenticated (before the fix it
// served every interface).
func TestProtectedMode(t *testing.T) {
	if DefaultConfig().GRPCAddr != "127.0.0.1:50051" || DefaultConfig().HTTPAddr != "127.0.0.1:8080" {
		t.Fatalf("default listeners %q %q are not loopback", DefaultConfig().GRPCAddr, DefaultConfig().HTTPAddr)
	}
	for _, c := range []struct {
		name  string
		mod   func(*Config)
		keyed bool
		ok    bool
	}{
		{"wildcard without keys", func(c *Config) { c.GRPCAddr = "0.0.0.0:0" }, false, false},
		{"wildcard HTTP without keys", func(c *Config) { c.HTTPAddr = ":0" }, false, false},
		{"wildcard allowed", func(c *Config) { c.GRPCAddr, c.AllowUnauthenticated = "0.0.0.0:0", true }, false, true},
		{"wildcard with keys", func(c *Config) { c.GRPCAddr = "0.0.0.0:0" }, true, true},
		{"loopback without keys", func(*Config) {}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			c.mod(&cfg)
			if c.keyed {
				cfg.Keys = testKeys(t)
			}
			s, err := New(cfg, Model{Backend: newFake(t, "m")})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Listen()
			defer s.Shutdown(0)
			if c.ok != (err == nil) {
				t.Fatalf("Listen: %v, want ok=%v", err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "--allow-unauthenticated") {
				t.Fatalf("the refusal does not say how to proceed: %v", err)
			}
		})
	}
}

// TestHTTPSlowBody is issue 17 point 8: a client trickling its body is cut
// off at the read timeout (before the fix 300 such connections were all
// open after 72 s).
func TestHTTPSlowBody(t *testing.T) {
	cfg := testConfig()
	cfg.HTTPReadTimeout = 300 * time.Millisecond
	s := serveFake(t, cfg, func(s *Server) {
		_ = s.HandleHTTP("POST /echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
		}))
	})
	c, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for i := 0; i < 100; i++ { // one byte every 50 ms: 5 s in all
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		t.Fatal("a trickling body kept its connection open past the read timeout")
	}
}

// TestHTTPMaxConns is issue 17 point 8: connections beyond the cap wait to
// be accepted.
func TestHTTPMaxConns(t *testing.T) {
	cfg := testConfig()
	cfg.HTTPMaxConns = 2
	s := serveFake(t, cfg, nil)
	get := func(c net.Conn, wait time.Duration) error {
		_ = c.SetDeadline(time.Now().Add(wait))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	var held []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", s.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	third, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	var ne net.Error
	if err := get(third, 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a third connection over the cap of 2 was served: %v", err)
	}
	held[0].Close()
	if err := get(third, 5*time.Second); err == nil {
		return // served once a slot freed (the request written above is answered)
	}
	t.Fatal("the waiting connection was not served after a slot freed")
}

// rawCodec sends pre-encoded bytes, so a test can put invalid UTF-8 in a
// string field (grpc-go's proto codec refuses to).
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*(v.(*[]byte)))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

// TestInvalidUTF8 is issue 17 point 9: a string field with invalid UTF-8
// is INVALID_ARGUMENT with ErrorInfo (before the fix: INTERNAL, no
// details), unary and streaming.
func TestInvalidUTF8(t *testing.T) {
	h := startServer(t, testConfig(), Model{Backend: newFake(t, "m")})
	// GetModelInfoRequest.model (field 1) = "\xff".
	bad := protowire.AppendTag(nil, 1, protowire.BytesType)
	bad = protowire.AppendBytes(bad, []byte{0xff, 'x'})
	var out pb.ModelInfo
	err := h.conn.Invoke(ctxT(t), "/openengine.v1.Control/GetModelInfo", &bad, &out, grpc.ForceCodecV2(rawCodec{}))
	wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")

	// GenerateRequest.prompt with invalid UTF-8, on the server stream.
	good, _ := proto.Marshal(&pb.GenerateRequest{Model: "m"})
	promptField := (&pb.GenerateRequest{}).ProtoReflect().Descriptor().Fields().ByName("prompt").Number()
	req := protowire.AppendTag(good, promptField, protowire.BytesType)
	req = protowire.AppendBytes(req, []byte("a\xc3\x28b"))
	st, err := h.conn.NewStream(ctxT(t), &grpc.StreamDesc{ServerStreams: true}, "/openengine.v1.Inference/Generate", grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(&req); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	var resp pb.GenerateResponse
	wantStatus(t, st.RecvMsg(&resp), codes.InvalidArgument, "INVALID_ARGUMENT")
	// The codec forgets what it refused, also when the call is refused
	// for its credentials first (that path used to keep the entry: memory
	// an unauthenticated client could grow without bound).
	h.s.SetKeys(testKeys(t))
	err = h.conn.Invoke(ctxT(t), "/openengine.v1.Control/GetModelInfo", &bad, &out, grpc.ForceCodecV2(rawCodec{}))
	wantStatus(t, err, codes.Unauthenticated, "UNAUTHENTICATED")
	err = h.conn.Invoke(as(ctxT(t), aliceKey), "/openengine.v1.Control/GetModelInfo", &bad, &out, grpc.ForceCodecV2(rawCodec{}))
	wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	n := 0
	h.s.codec.bad.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d refused messages still remembered", n)
	}
}

// TestShutdownStalledReaders is issue 17 point 11: clients that stop
// reading cannot hold the server past grace + 1 s (before the fix:
// grace + 10 s).
func TestShutdownStalledReaders(t *testing.T) {
	f := newFake(t, "m")
	cfg := testConfig()
	s, err := New(cfg, Model{Backend: f})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background()) }()
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 4; i++ { // never read
		if _, err := pb.NewInferenceClient(conn).Generate(ctx, with(prompt("big"), func(r *pb.GenerateRequest) {
			r.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(500)}
		})); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the handlers to block in Send", func() bool { return f.blockedStreams() == 4 })
	const grace = 300 * time.Millisecond
	start := time.Now()
	_ = s.Shutdown(grace)
	if took := time.Since(start); took > grace+time.Second {
		t.Fatalf("shutdown took %v with stalled readers, want at most grace + 1 s", took)
	}
	select {
	case <-served:
	case <-time.After(time.Second):
		t.Fatal("Serve did not return")
	}
}
