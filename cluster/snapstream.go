package cluster

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Snapshots travel apart from the message batches, one POST each to
// /raft/snapshot: the MsgSnap (which the leader's apply goroutine rewrote
// to its applied index, see mergeSnapshot), then the state machine's data
// streamed from StateMachine.Snapshot, so neither side holds it in memory;
// the receiver spools it to a file in the raft directory, steps the
// message, and the Ready loop restores from the file.

// sendSnapshot streams m and the state machine's snapshot to p, then
// tells raft whether p got it.
func (t *transport) sendSnapshot(p *peer, m *pb.Message) {
	defer t.wg.Done()
	defer p.snapshotting.Store(false)
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(t.n.writeSnapshotStream(pw, m))
	}()
	u := p.urls[0] + pathSnapshot
	start := time.Now()
	body := &countingReader{r: pr}
	err := t.post(p, u, body)
	pr.CloseWithError(errors.New("cluster: snapshot send finished"))
	if err != nil {
		t.n.logf("snapshot at index %d to peer %x failed: %v", m.GetSnapshot().GetMetadata().GetIndex(), p.id, err)
		t.n.raft.ReportSnapshot(p.id, raft.SnapshotFailure)
		return
	}
	took := time.Since(start)
	t.n.logf("snapshot at index %d sent to peer %x: %d bytes in %v (%.0f MB/s)", m.GetSnapshot().GetMetadata().GetIndex(), p.id, body.n, took.Round(time.Millisecond), float64(body.n)/(1<<20)/max(took.Seconds(), 1e-9))
	t.n.raft.ReportSnapshot(p.id, raft.SnapshotFinish)
}

// countingReader counts the bytes read through it, for the log line of a
// snapshot sent.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// chunkWriter frames each Write as uvarint length + bytes.
type chunkWriter struct{ w *bufio.Writer }

func (c chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var lenBuf [binary.MaxVarintLen64]byte
	if _, err := c.w.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(p)))]); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// writeSnapshotStream writes the snapshot message and the state
// machine's data to w.
func (n *raftNode) writeSnapshotStream(w io.Writer, m *pb.Message) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	mb, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	var lenBuf [binary.MaxVarintLen64]byte
	bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(mb)))])
	bw.Write(mb)
	index, err := n.sm.Snapshot(chunkWriter{bw})
	if err != nil {
		return fmt.Errorf("cluster: state machine snapshot: %w", err)
	}
	bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], 0)])
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], index)
	bw.Write(ib[:])
	return bw.Flush()
}

func (t *transport) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	from, ok := t.checkSender(w, r, http.MethodPost)
	if !ok {
		return
	}
	br := bufio.NewReaderSize(r.Body, 256<<10)
	n, err := binary.ReadUvarint(br)
	if err != nil || n > maxMessageBytes {
		http.Error(w, "malformed snapshot message", http.StatusBadRequest)
		return
	}
	mb := make([]byte, n)
	if _, err := io.ReadFull(br, mb); err != nil {
		http.Error(w, "truncated snapshot message", http.StatusBadRequest)
		return
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(mb, m); err != nil || m.GetType() != pb.MsgSnap || m.GetFrom() != from {
		http.Error(w, "not a snapshot message from the sender", http.StatusBadRequest)
		return
	}
	path, dataIndex, size, err := t.n.receiveSnapshotData(br, m.GetSnapshot().GetMetadata().GetIndex())
	if err != nil {
		t.n.logf("receiving snapshot from %x: %v", from, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	t.n.logf("received snapshot at index %d (data at %d, %d bytes) from %x", m.GetSnapshot().GetMetadata().GetIndex(), dataIndex, size, from)
	if err := t.n.raft.Step(r.Context(), m); err != nil {
		_ = os.Remove(path)
		http.Error(w, "raft: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// receiveSnapshotData writes the chunks of a snapshot stream to a file in
// the node's snapshot directory and registers it for the raft snapshot at
// snapIndex; size is the state machine's data in it, in bytes.
func (n *raftNode) receiveSnapshotData(br *bufio.Reader, snapIndex uint64) (path string, dataIndex uint64, size int64, err error) {
	f, err := os.CreateTemp(n.snapDir, "recv-*.data")
	if err != nil {
		return "", 0, 0, err
	}
	path = f.Name()
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	bw := bufio.NewWriterSize(f, 256<<10)
	for {
		c, err := binary.ReadUvarint(br)
		if err != nil {
			return "", 0, 0, fmt.Errorf("truncated snapshot data: %w", err)
		}
		if c == 0 {
			break
		}
		size += int64(c)
		if _, err := io.CopyN(bw, br, int64(c)); err != nil {
			return "", 0, 0, fmt.Errorf("truncated snapshot data: %w", err)
		}
	}
	var ib [8]byte
	if _, err := io.ReadFull(br, ib[:]); err != nil {
		return "", 0, 0, fmt.Errorf("snapshot data without its index: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return "", 0, 0, err
	}
	// The data may be older than snapIndex by entries that carry no
	// command (the leader took it after applying snapIndex), or newer.
	dataIndex = binary.BigEndian.Uint64(ib[:])
	n.recvMu.Lock()
	if old, ok := n.recv[snapIndex]; ok {
		_ = os.Remove(old.path)
	}
	n.recv[snapIndex] = receivedSnap{path: path, dataIndex: dataIndex}
	n.recvMu.Unlock()
	return path, dataIndex, size, nil
}

// removeStaleSnapshots deletes received snapshot files left by a crash.
func removeStaleSnapshots(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "recv-*.data"))
	if err != nil {
		return err
	}
	for _, p := range names {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return nil
}
