package deploy

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// repoRoot is the folder holding go.mod (the Docker build context).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestDockerContextBuilds: the build context that .dockerignore leaves
// (matched with Docker's own pattern rules) holds everything the
// Dockerfile's build stage needs: in a copy of just that context, `go
// list -deps` of ./cmd/oengine with CGO_ENABLED=0 finds every package,
// source and embedded file (what `go build` reads, without the minutes of
// compiling).
func TestDockerContextBuilds(t *testing.T) {
	root := repoRoot(t)
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	ctxDir := t.TempDir()
	copied := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		skip, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		if skip {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		dst := filepath.Join(ctxDir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		copied++
		return copyFile(path, dst)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{".git", "deploy", "docs"} {
		if _, err := os.Stat(filepath.Join(ctxDir, gone)); err == nil {
			t.Errorf("%s is in the build context", gone)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-buildvcs=false", "-f", "{{.ImportPath}} {{len .EmbedFiles}}", "./cmd/oengine")
	cmd.Dir = ctxDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list in the Docker context (%d files): %v\n%s", copied, err, out)
	}
	if !strings.Contains(string(out), "oengine/kernels/cuda ") || !strings.Contains(string(out), "oengine/cmd/oengine ") {
		t.Fatalf("go list in the Docker context lists no oengine packages:\n%s", out)
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestDockerBuild runs `docker build` where a Docker daemon answers (and
// OENGINE_DOCKER_BUILD=1 asks for it: it pulls base images); elsewhere it
// is skipped (docs/deploy.md, "Docker").
func TestDockerBuild(t *testing.T) {
	if os.Getenv("OENGINE_DOCKER_BUILD") != "1" {
		t.Skip("set OENGINE_DOCKER_BUILD=1 on a machine with a Docker daemon to run docker build")
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("no Docker daemon: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "build", "-t", "oengine:test", ".")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	out, err := exec.Command("docker", "run", "--rm", "oengine:test", "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "oengine") {
		t.Fatalf("docker run oengine:test version: %v\n%s", err, out)
	}
}
