package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParseDevice(t *testing.T) {
	tests := []struct {
		in      string
		kind    Kind
		idx     int
		wantErr bool
	}{
		{"auto", KindAuto, 0, false},
		{"", KindAuto, 0, false},
		{"cpu", KindCPU, 0, false},
		{"CPU", KindCPU, 0, false},
		{"cuda", KindCUDA, 0, false},
		{"cuda:0", KindCUDA, 0, false},
		{"cuda:3", KindCUDA, 3, false},
		{" cuda:1 ", KindCUDA, 1, false},
		{"cuda:", 0, 0, true},
		{"cuda:-1", 0, 0, true},
		{"cuda:x", 0, 0, true},
		{"metal", 0, 0, true},
		{"cuda0", 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			k, i, err := ParseDevice(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			if err == nil && (k != tc.kind || i != tc.idx) {
				t.Fatalf("got %v:%d, want %v:%d", k, i, tc.kind, tc.idx)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	ok := func(i int) (Info, error) { return Info{Index: i, Name: "Fake", Major: 9}, nil }
	noDriver := func(int) (Info, error) { return Info{}, fmt.Errorf("%w: tried libcuda.so.1", ErrNoDriver) }
	tests := []struct {
		name    string
		spec    string
		usable  usableFunc
		kind    Kind
		idx     int
		want    error
		logHas  string
		wantErr bool
	}{
		{name: "auto with gpu", spec: "auto", usable: ok, kind: KindCUDA, logHas: "using CUDA"},
		{name: "auto without driver", spec: "auto", usable: noDriver, kind: KindCPU, logHas: "no CUDA driver"},
		{name: "cpu never probes", spec: "cpu", usable: func(int) (Info, error) { panic("probed") }, kind: KindCPU},
		{name: "cuda:2", spec: "cuda:2", usable: ok, kind: KindCUDA, idx: 2},
		{name: "cuda without driver fails", spec: "cuda", usable: noDriver, want: ErrNoDriver, wantErr: true},
		{name: "bad spec", spec: "tpu", usable: ok, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			k, info, err := selectWith(tc.spec, log, tc.usable)
			if tc.wantErr {
				if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil || k != tc.kind {
				t.Fatalf("got %v, %v", k, err)
			}
			if k == KindCUDA && info.Index != tc.idx {
				t.Fatalf("index %d", info.Index)
			}
			if !strings.Contains(buf.String(), tc.logHas) {
				t.Fatalf("log %q lacks %q", buf.String(), tc.logHas)
			}
		})
	}
}
