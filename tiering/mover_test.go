//go:build unix

package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// The move tests start from a database written with everything in p0, then
// reopen it with p0 too small for anything but L0: nearly every table has
// to move to p1.
var (
	templatePaths = []Path{{"p0", 1 << 30}, {"p1", 1 << 30}}
	movedPaths    = []Path{{"p0", 1 << 20}, {"p1", 1 << 30}}
)

// templateRecords of valueSize bytes make the starting database (fewer
// under the race detector, which is ~10x slower).
var templateRecords = map[bool]int{false: 4000, true: 2000}[raceEnabled]

// makeTemplate writes the starting database under a new directory.
func makeTemplate(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	d := openTestDB(t, root, templatePaths, Options{})
	d.write(0, templateRecords, 3)
	d.settle()
	if n := d.layout.Stats().Paths[1].Files; n != 0 {
		t.Fatalf("template has %d files in p1", n)
	}
	d.close()
	return root
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

var errInjected = errors.New("injected")

// TestMoveErrorAtEachStep injects an error at each step of a move: the
// failed move rolls back (or, past the switch, leaves an old copy that the
// next pass removes), every key stays readable, and after the next pass and
// a reopen no table is lost, duplicated or misplaced.
func TestMoveErrorAtEachStep(t *testing.T) {
	template := makeTemplate(t)
	for s := stepStart; s < numMoveSteps; s++ {
		t.Run(s.String(), func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			copyTree(t, template, root)
			moves := 0
			o := Options{DisableMover: true, hook: func(step moveStep, name string) error {
				if step == stepStart {
					moves++
				}
				if moves == 2 && step == s {
					return fmt.Errorf("%w at %s of %s", errInjected, step, name)
				}
				return nil
			}}
			d := openTestDB(t, root, movedPaths, o)
			err := d.layout.Rebalance(context.Background())
			if !errors.Is(err, errInjected) {
				t.Fatalf("Rebalance: %v, want the injected error", err)
			}
			st := d.layout.Stats()
			if st.MoveFailures != 1 || st.MovedFiles < 1 {
				t.Errorf("after the failed pass: %d failures, %d moved", st.MoveFailures, st.MovedFiles)
			}
			verifyKeys(t, d.db, 0, templateRecords)
			d.layout.opts.hook = nil
			d.settle()
			checkConsistent(t, d.layout, d.db)
			checkPlacement(t, d.layout, d.db, 1<<20)
			d.close()

			d = openTestDB(t, root, movedPaths, Options{DisableMover: true})
			if r := d.layout.Stats().Recovery; r != (RecoveryStats{}) {
				t.Errorf("reopen had to clean up: %+v", r)
			}
			checkConsistent(t, d.layout, d.db)
			verifyKeys(t, d.db, 0, templateRecords)
			d.close()
		})
	}
}

const extraRecords = 300

// TestCrashChild is the process TestCrashAtEachStep kills; it runs only
// with TIERING_CRASH_ROOT set.
func TestCrashChild(t *testing.T) {
	root := os.Getenv("TIERING_CRASH_ROOT")
	if root == "" {
		t.Skip("run by TestCrashAtEachStep")
	}
	step, err := strconv.Atoi(os.Getenv("TIERING_CRASH_STEP"))
	if err != nil {
		t.Fatal(err)
	}
	moves := 0
	o := Options{DisableMover: true, hook: func(s moveStep, name string) error {
		if s == stepStart {
			moves++
		}
		if moves == 2 && s == moveStep(step) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}}
	d := openTestDB(t, root, movedPaths, o)
	// Some records only in the WAL, synced.
	d.write(templateRecords, templateRecords+extraRecords, 4)
	if err := d.db.LogData(nil, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_ = d.layout.Rebalance(context.Background())
	t.Fatalf("the move did not reach step %d", step)
}

// TestCrashAtEachStep kills a process (SIGKILL) at each step of a move,
// then reopens: New cleans what the move left, every key is present, no
// table is lost or duplicated, and the next pass completes the placement.
func TestCrashAtEachStep(t *testing.T) {
	if os.Getenv("TIERING_CRASH_ROOT") != "" {
		t.Skip("child")
	}
	template := makeTemplate(t)
	wantRecovery := map[moveStep]RecoveryStats{
		stepCopied:    {TempsRemoved: 1},
		stepSynced:    {TempsRemoved: 1},
		stepRenamed:   {DuplicatesRemoved: 1},
		stepDirSynced: {DuplicatesRemoved: 1},
		stepSwitched:  {DuplicatesRemoved: 1},
	}
	for s := stepStart; s < numMoveSteps; s++ {
		t.Run(s.String(), func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			copyTree(t, template, root)
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "TIERING_CRASH_ROOT="+root, "TIERING_CRASH_STEP="+strconv.Itoa(int(s)))
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child was not killed (%v):\n%s", err, out)
			}
			d := openTestDB(t, root, movedPaths, Options{DisableMover: true})
			if r := d.layout.Stats().Recovery; r != wantRecovery[s] {
				t.Errorf("recovery %+v, want %+v", r, wantRecovery[s])
			}
			checkConsistent(t, d.layout, d.db)
			verifyKeys(t, d.db, 0, templateRecords+extraRecords)
			d.settle()
			checkConsistent(t, d.layout, d.db)
			checkPlacement(t, d.layout, d.db, 1<<20)
			d.close()
		})
	}
}
