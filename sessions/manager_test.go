package sessions

import (
	"context"
	"regexp"
	"testing"
	"time"
)

func dur(d time.Duration) *time.Duration { return &d }

func TestLease(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.DefaultLease = time.Minute; c.MaxLease = 10 * time.Minute })
	cases := []struct {
		name  string
		lease *time.Duration
		want  time.Duration
		code  Code
	}{
		{"absent gives the default", nil, time.Minute, -1},
		{"zero is invalid", dur(0), 0, CodeInvalid},
		{"negative is invalid", dur(-time.Second), 0, CodeInvalid},
		{"within bounds is granted", dur(3 * time.Minute), 3 * time.Minute, -1},
		{"above max is clamped", dur(time.Hour), 10 * time.Minute, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, err := f.m.Open(context.Background(), OpenRequest{Model: "toy", Lease: c.lease})
			if c.code >= 0 {
				codeIs(t, err, c.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if in.Lease != c.want || !in.ExpiresAt.Equal(f.clock.Now().Add(c.want)) {
				t.Fatalf("lease %v expires %v, want %v from now", in.Lease, in.ExpiresAt, c.want)
			}
			if in.State != StateIdle {
				t.Fatalf("state %v", in.State)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	f := newFixture(t, nil)
	a := f.open("")
	b := f.open("")
	hexID := regexp.MustCompile(`^gs-[0-9a-f]{32}$`)
	if !hexID.MatchString(a.Ref.SessionID) || a.Ref.SessionID == b.Ref.SessionID {
		t.Fatalf("minted ids %q %q", a.Ref.SessionID, b.Ref.SessionID)
	}
	if a.Ref.Owner != instance {
		t.Fatalf("owner %q", a.Ref.Owner)
	}
	f.open("mine")
	_, err := f.m.Open(context.Background(), OpenRequest{ID: "mine", Model: "toy"})
	codeIs(t, err, CodeDuplicate)
	if _, _, err := f.m.CloseSession(ref("mine")); err != nil {
		t.Fatal(err)
	}
	_, err = f.m.Open(context.Background(), OpenRequest{ID: "mine", Model: "toy"})
	codeIs(t, err, CodeDuplicate) // tombstones keep the id taken

	bad := []struct {
		name, id, model, lora string
		code                  Code
	}{
		{"space in id", "a b", "toy", "", CodeInvalid},
		{"control char", "a\x01", "toy", "", CodeInvalid},
		{"too long", string(make([]byte, MaxIDBytes+1)), "toy", "", CodeInvalid},
		{"no model", "x", "", "", CodeInvalid},
		{"unknown model", "x", "nope", "", CodeModelNotFound},
		{"lora", "x", "toy", "adapter", CodeUnsupported},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.m.Open(context.Background(), OpenRequest{ID: c.id, Model: c.model, LoRA: c.lora})
			codeIs(t, err, c.code)
		})
	}
}

func TestRefChecks(t *testing.T) {
	f := newFixture(t, nil)
	f.open("s1")
	cases := []struct {
		name string
		ref  Ref
		code Code
	}{
		{"owner mismatch", Ref{SessionID: "s1", Owner: "other"}, CodeOwnerMismatch},
		{"empty owner", Ref{SessionID: "s1"}, CodeInvalid},
		{"empty id", Ref{Owner: instance}, CodeInvalid},
		{"unknown", ref("nope"), CodeNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.m.Get(c.ref, false)
			codeIs(t, err, c.code)
			_, err = f.m.Renew(c.ref, nil)
			codeIs(t, err, c.code)
			_, _, err = f.m.CloseSession(c.ref)
			codeIs(t, err, c.code)
			_, err = f.m.Begin(context.Background(), Continuation{Ref: c.ref, Model: "toy"}, reqIDs(1, 2))
			codeIs(t, err, c.code)
		})
	}
	if st := f.get("s1").State; st != StateIdle {
		t.Fatalf("foreign refs changed the session: %v", st)
	}
}

func TestCloseTwiceAndRetention(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Retention = time.Hour })
	f.open("s", seq(0, 10)...)
	st, in, err := f.m.CloseSession(ref("s"))
	if err != nil || st != CloseClosed || in.State != StateClosed {
		t.Fatalf("first close: %v %v %v", st, in.State, err)
	}
	if p := f.eng.Cache().PinnedPages("session:s"); p != 0 {
		t.Fatalf("%d pages still pinned", p)
	}
	st, _, err = f.m.CloseSession(ref("s"))
	if err != nil || st != CloseAlreadyClosed {
		t.Fatalf("second close: %v %v", st, err)
	}
	if in := f.get("s"); in.State != StateClosed || in.RetainedTokens != 0 {
		t.Fatalf("tombstone: %+v", in)
	}
	_, err = f.m.Renew(ref("s"), nil)
	codeIs(t, err, CodeClosed)
	_, err = f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy"}, reqIDs(1))
	codeIs(t, err, CodeClosed)
	f.clock.Advance(time.Hour)
	_, _, err = f.m.CloseSession(ref("s"))
	codeIs(t, err, CodeNotFound)
	f.open("s") // the id is free again
}

func TestExpiry(t *testing.T) {
	f := newFixture(t, nil)
	f.open("s", seq(0, 9)...)
	if in := f.get("s"); in.PinnedPages != 3 || in.RetainedTokens != 9 {
		t.Fatalf("before expiry: %+v", in)
	}
	f.clock.Advance(DefaultLease - time.Second)
	if in := f.get("s"); in.State != StateIdle {
		t.Fatalf("expired early: %v", in.State)
	}
	f.clock.Advance(time.Second)
	f.m.Reap()
	if p := f.eng.Cache().PinnedPages("session:s"); p != 0 {
		t.Fatalf("expired session still pins %d pages", p)
	}
	if in := f.get("s"); in.State != StateExpired {
		t.Fatalf("state %v", in.State)
	}
	_, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy"}, reqIDs(1))
	codeIs(t, err, CodeExpired)
	_, err = f.m.Renew(ref("s"), nil)
	codeIs(t, err, CodeExpired)
	st, _, err := f.m.CloseSession(ref("s"))
	if err != nil || st != CloseExpired {
		t.Fatalf("close of expired: %v %v", st, err)
	}
	if err := f.eng.Cache().CheckIntegrity(); err != nil {
		t.Fatal(err)
	}
}

func TestExpiryWithoutReaper(t *testing.T) {
	// The clock is checked on access: no reap needed to see EXPIRED.
	f := newFixture(t, nil)
	f.open("s", 1, 2, 3)
	f.clock.Advance(DefaultLease)
	_, err := f.m.Begin(context.Background(), Continuation{Ref: ref("s"), Model: "toy"}, reqIDs(1))
	codeIs(t, err, CodeExpired)
}

func TestRenew(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxLease = time.Hour })
	f.open("s")
	f.clock.Advance(DefaultLease / 2)
	in, err := f.m.Renew(ref("s"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.Lease != DefaultLease || !in.ExpiresAt.Equal(f.clock.Now().Add(DefaultLease)) {
		t.Fatalf("renew kept lease: %+v", in)
	}
	in, err = f.m.Renew(ref("s"), dur(2*time.Hour))
	if err != nil || in.Lease != time.Hour {
		t.Fatalf("renew with a longer lease: %v %v", in.Lease, err)
	}
	_, err = f.m.Renew(ref("s"), dur(0))
	codeIs(t, err, CodeInvalid)
	f.clock.Advance(59 * time.Minute)
	if st := f.get("s").State; st != StateIdle {
		t.Fatalf("state %v", st)
	}
}

func TestMaxSessions(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxSessions = 2 })
	f.open("a")
	f.open("b")
	_, err := f.m.Open(context.Background(), OpenRequest{ID: "c", Model: "toy"})
	codeIs(t, err, CodeBudget)
	if _, _, err := f.m.CloseSession(ref("a")); err != nil {
		t.Fatal(err)
	}
	f.open("c") // tombstones do not count
}

func TestReaperGoroutineStops(t *testing.T) {
	base := testingGoroutines()
	m, err := New(Config{InstanceID: "x", Models: func(string) (Engine, bool) { return nil, false }, ReapInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	m.Close()
	m.Close()
	waitGoroutines(t, base)
}
