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
// the receiver hands it to the state machine as it arrives if that is a
// RestorePreparer (else spools it to a file in the raft directory), steps
// the message, and the Ready loop commits the prepared snapshot (or
// restores from the file).

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
	_, err = n.writeStateData(bw)
	return err
}

// writeStateData writes the state machine's data to bw in chunks, the
// zero length that ends them and the 8-byte index the data is at, flushes
// bw and returns that index. A stream that stops before the index (the
// state machine failed) is refused by its reader (receiveSnapshotData).
func (n *raftNode) writeStateData(bw *bufio.Writer) (uint64, error) {
	index, err := n.sm.Snapshot(chunkWriter{bw})
	if err != nil {
		return 0, fmt.Errorf("cluster: state machine snapshot: %w", err)
	}
	var lenBuf [binary.MaxVarintLen64]byte
	bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], 0)])
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], index)
	bw.Write(ib[:])
	return index, bw.Flush()
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
	snapIndex := m.GetSnapshot().GetMetadata().GetIndex()
	rs, size, err := t.n.receiveSnapshotData(br)
	if err != nil {
		t.n.logf("receiving snapshot from %x: %v", from, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	t.n.registerSnapshotData(snapIndex, rs)
	how := "spooled to a file"
	if rs.prepared != nil {
		how = "written into the state machine as it arrived"
	}
	t.n.logf("received snapshot at index %d (data at %d, %d bytes) from %x, %s", snapIndex, rs.dataIndex, size, from, how)
	if err := t.n.raft.Step(r.Context(), m); err != nil {
		t.n.unregisterSnapshotData(snapIndex, rs)
		http.Error(w, "raft: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// receiveSnapshotData reads the state machine's data of a snapshot stream:
// into the state machine as it arrives if it is a RestorePreparer, else
// into a file in the node's snapshot directory. size is the data, in
// bytes. On an error nothing is left behind.
func (n *raftNode) receiveSnapshotData(br *bufio.Reader) (rs receivedSnap, size int64, err error) {
	cr := &chunkReader{br: br}
	if p, ok := n.sm.(RestorePreparer); ok {
		rs.prepared, err = p.PrepareRestore(cr)
		if err == nil && !cr.end {
			// The state machine's snapshot ended before the stream's data.
			var extra int64
			if extra, err = io.Copy(io.Discard, cr); err == nil && extra > 0 {
				err = fmt.Errorf("%d bytes of snapshot data after the state machine's snapshot ended", extra)
			}
		}
	} else {
		rs.path, err = spoolSnapshotData(n.snapDir, cr)
	}
	if err == nil {
		rs.dataIndex, err = readSnapshotTrailer(br)
	}
	if err != nil {
		rs.drop()
		return receivedSnap{}, 0, err
	}
	return rs, cr.n, nil
}

// registerSnapshotData records rs as the data of the raft snapshot at
// snapIndex, for restoreSnapshot, dropping any received before for it.
func (n *raftNode) registerSnapshotData(snapIndex uint64, rs receivedSnap) {
	n.recvMu.Lock()
	defer n.recvMu.Unlock()
	if old, ok := n.recv[snapIndex]; ok {
		old.drop()
	}
	n.recv[snapIndex] = rs
}

// unregisterSnapshotData drops rs, registered for snapIndex, if it is
// still there (raft refused the snapshot).
func (n *raftNode) unregisterSnapshotData(snapIndex uint64, rs receivedSnap) {
	n.recvMu.Lock()
	defer n.recvMu.Unlock()
	if cur, ok := n.recv[snapIndex]; ok && cur == rs {
		delete(n.recv, snapIndex)
		rs.drop()
	}
}

// spoolSnapshotData writes r to a new file in dir and returns its path;
// on an error it leaves no file.
func spoolSnapshotData(dir string, r io.Reader) (string, error) {
	f, err := os.CreateTemp(dir, "recv-*.data")
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	_, err = io.Copy(bw, r)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// readSnapshotTrailer reads the index of the state machine's data that
// ends a snapshot stream. The data may be older than the raft snapshot's
// index by entries that carry no command (the leader took it after
// applying that index), or newer.
func readSnapshotTrailer(br *bufio.Reader) (uint64, error) {
	var ib [8]byte
	if _, err := io.ReadFull(br, ib[:]); err != nil {
		return 0, fmt.Errorf("snapshot data without its index: %w", err)
	}
	return binary.BigEndian.Uint64(ib[:]), nil
}

// chunkReader reads the data of chunkWriter's frames up to the zero
// length that ends them (then io.EOF, with end set); n counts the bytes.
// A stream that ends before is "truncated snapshot data".
type chunkReader struct {
	br   *bufio.Reader
	left uint64 // of the current chunk
	end  bool
	n    int64
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for c.left == 0 {
		if c.end {
			return 0, io.EOF
		}
		l, err := binary.ReadUvarint(c.br)
		if err != nil {
			return 0, fmt.Errorf("truncated snapshot data: %w", err)
		}
		if l == 0 {
			c.end = true
			return 0, io.EOF
		}
		c.left = l
	}
	if uint64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= uint64(n)
	c.n += int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return n, fmt.Errorf("truncated snapshot data: %w", err)
	}
	return n, nil
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
