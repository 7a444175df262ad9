package linkq_test

import (
	"slices"
	"testing"

	"github.com/corral-rt/corral/internal/linkq"
)

func TestTake(t *testing.T) {
	tests := map[string]struct {
		sizes              []int
		maxItems, maxBytes int
		want               [][]int // item indexes per take
	}{
		"all at once":       {sizes: []int{1, 1, 1}, maxItems: 10, maxBytes: 10, want: [][]int{{0, 1, 2}}},
		"by count":          {sizes: []int{1, 1, 1}, maxItems: 2, maxBytes: 10, want: [][]int{{0, 1}, {2}}},
		"by bytes":          {sizes: []int{4, 4, 4}, maxItems: 10, maxBytes: 8, want: [][]int{{0, 1}, {2}}},
		"oversize alone":    {sizes: []int{20, 1}, maxItems: 10, maxBytes: 8, want: [][]int{{0}, {1}}},
		"oversize in order": {sizes: []int{1, 20, 1}, maxItems: 10, maxBytes: 8, want: [][]int{{0}, {1}, {2}}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			q := linkq.New[int]()
			for i, s := range tt.sizes {
				if !q.Push(i, s, 0) {
					t.Fatal("push refused")
				}
			}
			for _, want := range tt.want {
				if got := q.Take(tt.maxItems, tt.maxBytes); !slices.Equal(got, want) {
					t.Fatalf("took %v, want %v", got, want)
				}
			}
			if got := q.Take(tt.maxItems, tt.maxBytes); got != nil {
				t.Fatalf("left %v", got)
			}
		})
	}
}

func TestPushBoundsAndClose(t *testing.T) {
	q := linkq.New[string]()
	if !q.Push("a", 1, 2) || !q.Push("b", 1, 2) || q.Push("c", 1, 2) {
		t.Fatal("limit of 2 not enforced")
	}
	select {
	case <-q.Ready():
	default:
		t.Fatal("not signalled ready")
	}
	q.Close()
	if q.Push("d", 1, 0) {
		t.Fatal("push after close accepted")
	}
	if got := q.Take(10, 10); got != nil {
		t.Fatalf("closed queue returned %v", got)
	}
}

func TestDrain(t *testing.T) {
	q := linkq.New[string]()
	q.Push("a", 1, 0)
	q.Push("b", 1, 0)
	if got := q.Drain(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("Drain = %v, want [a b]", got)
	}
	if q.Push("c", 1, 0) {
		t.Fatal("push after Drain accepted")
	}
	if got := q.Drain(); got != nil {
		t.Fatalf("second Drain = %v, want nil", got)
	}
}

func TestLen(t *testing.T) {
	q := linkq.New[string]()
	if n, b := q.Len(); n != 0 || b != 0 {
		t.Fatalf("empty queue: %d items, %d bytes", n, b)
	}
	q.Push("a", 3, 0)
	q.Push("b", 4, 0)
	if n, b := q.Len(); n != 2 || b != 7 {
		t.Fatalf("after two pushes: %d items, %d bytes, want 2 and 7", n, b)
	}
	q.Take(1, 100)
	if n, b := q.Len(); n != 1 || b != 4 {
		t.Fatalf("after a take: %d items, %d bytes, want 1 and 4", n, b)
	}
	q.Close()
	if n, b := q.Len(); n != 0 || b != 0 {
		t.Fatalf("closed queue: %d items, %d bytes", n, b)
	}
}
