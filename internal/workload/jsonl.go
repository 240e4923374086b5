package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLineBytes is the longest JSON Lines line accepted, 64 MiB, not counting
// its line ending.
const MaxLineBytes = 64 << 20

// ErrNoEntities is returned for a JSON Lines input without any line.
var ErrNoEntities = errors.New("workload: no entities")

// ReadJSONL reads JSON Lines from r and calls fn for each line with its
// entity index i and the line without its ending ("\n" or "\r\n").
//
//  1. i is the line number counted from 0, the index Key takes: the first
//     line is entity i = 0, key entity:00000000.
//  2. Every line must be one valid JSON value; a blank line (empty or only
//     white space) is an error, not skipped, so that i always equals the
//     line's position. A final line ending does not start another line.
//  3. Errors name the line counted from 1, as editors do: "line 17: not
//     valid JSON: <detail> (at byte 5)" is entity i = 16, and its fifth
//     byte (counted from 1) is where the decoder gave up. The detail is a
//     *json.SyntaxError, reachable with errors.As.
//  4. An error returned by fn stops the read and is returned as
//     "line N: <err>", wrapped with %w.
//  5. An input with no line returns ErrNoEntities.
//
// A UTF-8 byte order mark before the first line is skipped. line is valid
// only until fn returns; fn copies it to keep it. A nil fn only checks the
// input. ReadJSONL returns the number of valid lines read.
func ReadJSONL(r io.Reader, fn func(i int, line []byte) error) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte // a line longer than br's buffer, gathered here
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(line) > MaxLineBytes+2 {
				return n, fmt.Errorf("line %d: longer than %d bytes", n+1, MaxLineBytes)
			}
			long = append(long, line...)
			continue
		}
		if err != nil && err != io.EOF {
			return n, fmt.Errorf("line %d: %w", n+1, err)
		}
		if len(long) > 0 {
			long = append(long, line...)
			line = long
		}
		if len(line) == 0 && err == io.EOF {
			break
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if n == 0 {
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		if len(line) > MaxLineBytes {
			return n, fmt.Errorf("line %d: longer than %d bytes", n+1, MaxLineBytes)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			return n, fmt.Errorf("line %d: blank line: every line must hold one JSON value", n+1)
		}
		if !json.Valid(line) {
			return n, fmt.Errorf("line %d: not valid JSON: %w", n+1, syntaxError(line))
		}
		if fn != nil {
			if ferr := fn(n, line); ferr != nil {
				return n, fmt.Errorf("line %d: %w", n+1, ferr)
			}
		}
		n++
		long = long[:0]
		if err == io.EOF {
			break
		}
	}
	if n == 0 {
		return 0, ErrNoEntities
	}
	return n, nil
}

// syntaxError returns the decoder's account of why line is not JSON.
func syntaxError(line []byte) error {
	var v json.RawMessage
	err := json.Unmarshal(line, &v)
	if err == nil {
		// json.Valid and json.Unmarshal agree; keep an error regardless.
		return errors.New("rejected by json.Valid")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &offsetError{se}
	}
	return err
}

// offsetError adds the position to a *json.SyntaxError's message: Offset is
// the number of bytes read, so the offending byte counted from 1.
type offsetError struct{ *json.SyntaxError }

func (e *offsetError) Error() string {
	return fmt.Sprintf("%s (at byte %d)", e.SyntaxError.Error(), e.Offset)
}

func (e *offsetError) Unwrap() error { return e.SyntaxError }

// LoadJSONL reads the JSON Lines file at path as ReadJSONL does and returns
// a copy of every line, entity i at index i. Errors name the path.
func LoadJSONL(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *fs.PathError: "open <path>: ..."
	}
	defer f.Close()
	var lines [][]byte
	if _, err := ReadJSONL(f, func(_ int, line []byte) error {
		lines = append(lines, bytes.Clone(line))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lines, nil
}
