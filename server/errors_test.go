package server

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratadb/strata/mvcc"
)

// TestErrorTableCoversMVCC: every error mvcc declares has its row in
// errorTable, so a new one cannot reach clients as an unmapped Internal
// error or stop the node by omission.
func TestErrorTableCoversMVCC(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../mvcc/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	inTable := map[string]bool{}
	ast.Inspect(tf, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "mvcc" {
				inTable[sel.Sel.Name] = true
			}
		}
		return true
	})
	var declared int
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, spec := range g.Specs {
			for _, name := range spec.(*ast.ValueSpec).Names {
				declared++
				if !inTable[name.Name] {
					t.Errorf("mvcc.%s has no row in errorTable", name.Name)
				}
			}
		}
	}
	if declared < 16 {
		t.Fatalf("found %d errors in mvcc/errors.go: the parse is wrong", declared)
	}
}

// TestErrorTable: the stop decision and the gRPC status come from the
// same row, wrapped errors included.
func TestErrorTable(t *testing.T) {
	for _, c := range []struct {
		err   error
		stops bool
		want  error
		code  codes.Code
	}{
		{err: mvcc.ErrCompacted, want: rpctypes.ErrGRPCCompacted},
		{err: fmt.Errorf("range at 3: %w", mvcc.ErrFutureRev), want: rpctypes.ErrGRPCFutureRev},
		{err: errTooManyOps, want: rpctypes.ErrGRPCTooManyOps},
		{err: invalid("bad"), code: codes.InvalidArgument},
		{err: mvcc.ErrInvalidLease, code: codes.InvalidArgument},
		{err: unsupported("x"), code: codes.Unimplemented},
		{err: mvcc.ErrClosed, stops: true, want: rpctypes.ErrGRPCStopped},
		{err: mvcc.ErrCorrupt, stops: true, code: codes.Internal},
		{err: errors.New("engine: disk on fire"), stops: true, code: codes.Internal},
	} {
		if got := stopsNode(c.err); got != c.stops {
			t.Errorf("stopsNode(%v) = %v, want %v", c.err, got, c.stops)
		}
		got := toGRPC(c.err)
		if c.want != nil {
			if got != c.want {
				t.Errorf("toGRPC(%v) = %v, want %v", c.err, got, c.want)
			}
			continue
		}
		if status.Code(got) != c.code {
			t.Errorf("toGRPC(%v) = %v, want code %v", c.err, got, c.code)
		}
	}
}
