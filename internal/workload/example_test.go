package workload_test

import (
	"fmt"
	"strings"

	"github.com/stratadb/strata/internal/workload"
)

func ExampleKey() {
	fmt.Printf("%s %s\n", workload.Key(0), workload.Key(42))
	// Output: entity:00000000 entity:00000042
}

func ExampleReadJSONL() {
	in := "{\"name\":\"ada\"}\n{\"name\":\"alan\"}\n"
	n, err := workload.ReadJSONL(strings.NewReader(in), func(i int, line []byte) error {
		fmt.Printf("%s = %s\n", workload.Key(i), line)
		return nil
	})
	fmt.Println(n, err)

	_, err = workload.ReadJSONL(strings.NewReader("{}\n{oops}\n"), func(int, []byte) error { return nil })
	fmt.Println(err)
	// Output:
	// entity:00000000 = {"name":"ada"}
	// entity:00000001 = {"name":"alan"}
	// 2 <nil>
	// line 2: not valid JSON: invalid character 'o' looking for beginning of object key string (at byte 2)
}

func ExampleGenerator_Entity() {
	g := workload.New(1, 1024)
	doc := g.Entity(7)
	fmt.Println(len(doc) <= 1024, len(doc) >= 900, strings.HasPrefix(string(doc), `{"id":7,`))
	// Output: true true true
}
