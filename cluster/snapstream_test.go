package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// framedSnapshot is data as writeSnapshotStream frames it (without the
// message before it): chunks, a zero length, the data's index.
func framedSnapshot(t *testing.T, data []byte, index uint64) []byte {
	t.Helper()
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	cw := chunkWriter{bw}
	for len(data) > 0 {
		n := min(len(data), 1000)
		if _, err := cw.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
	bw.Write([]byte{0})
	bw.Write(binary.BigEndian.AppendUint64(nil, index))
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// recordingPreparer is a RestorePreparer that reads up to limit bytes
// (all, if limit < 0) and records what became of each snapshot it
// prepared.
type recordingPreparer struct {
	kvSM
	limit             int64
	read              []byte
	commits, discards int
}

func (p *recordingPreparer) PrepareRestore(r io.Reader) (PreparedRestore, error) {
	if p.limit >= 0 {
		r = io.LimitReader(r, p.limit)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	p.read = b
	return &recordedRestore{p}, nil
}

type recordedRestore struct{ p *recordingPreparer }

func (r *recordedRestore) Commit(uint64) error { r.p.commits++; return nil }
func (r *recordedRestore) Discard()            { r.p.discards++ }

// TestReceiveSnapshotData: a state machine that prepares restores is
// handed the stream's data as it arrives (no file spooled); one that reads
// less than the data, or a stream without its index, is refused and the
// prepared snapshot discarded; a state machine that does not prepare gets
// a spooled file, none left by a truncated stream.
func TestReceiveSnapshotData(t *testing.T) {
	data := bytes.Repeat([]byte("snapshot data "), 500)
	good := framedSnapshot(t, data, 42)
	receive := func(sm StateMachine, stream []byte) (receivedSnap, int64, error, string) {
		dir := t.TempDir()
		n := &raftNode{sm: sm, snapDir: dir}
		rs, size, err := n.receiveSnapshotData(bufio.NewReader(bytes.NewReader(stream)))
		names, _ := filepath.Glob(filepath.Join(dir, "*"))
		return rs, size, err, strings.Join(names, " ")
	}

	p := &recordingPreparer{limit: -1}
	rs, size, err, files := receive(p, good)
	if err != nil || rs.prepared == nil || rs.dataIndex != 42 || size != int64(len(data)) || !bytes.Equal(p.read, data) || files != "" {
		t.Fatalf("prepared: %+v, size %d, %v, read %d bytes, files %q", rs, size, err, len(p.read), files)
	}
	if err := rs.prepared.Commit(42); err != nil || p.commits != 1 || p.discards != 0 {
		t.Fatalf("commit: %v, %d commits, %d discards", err, p.commits, p.discards)
	}

	p = &recordingPreparer{limit: int64(len(data) - 10)}
	if _, _, err, _ := receive(p, good); err == nil || !strings.Contains(err.Error(), "10 bytes of snapshot data after") || p.discards != 1 {
		t.Fatalf("a state machine reading less than the data: %v, %d discards", err, p.discards)
	}
	p = &recordingPreparer{limit: -1}
	if _, _, err, _ := receive(p, good[:len(good)-3]); err == nil || !strings.Contains(err.Error(), "without its index") || p.discards != 1 {
		t.Fatalf("a stream without its index: %v, %d discards", err, p.discards)
	}
	p = &recordingPreparer{limit: -1}
	if _, _, err, _ := receive(p, good[:len(good)/2]); err == nil || !strings.Contains(err.Error(), "truncated snapshot data") {
		t.Fatalf("a stream cut in its data: %v", err)
	}

	rs, size, err, files = receive(newKVSM(), good)
	if err != nil || rs.prepared != nil || rs.path == "" || rs.dataIndex != 42 || size != int64(len(data)) || files != rs.path {
		t.Fatalf("spooled: %+v, size %d, %v, files %q", rs, size, err, files)
	}
	if b, err := os.ReadFile(rs.path); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("the spooled file holds %d bytes (%v), want the data's %d", len(b), err, len(data))
	}
	if _, _, err, files := receive(newKVSM(), good[:len(good)/2]); err == nil || !strings.Contains(err.Error(), "truncated snapshot data") || files != "" {
		t.Fatalf("a truncated stream spooled: %v, files %q", err, files)
	}
}
