package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// table prints rows in aligned columns: the first left-aligned, the middle
// ones right-aligned, the last left-aligned and free.
type table struct {
	w    io.Writer
	rows [][]string
}

func (t *table) header(cols ...string) { t.rows = append(t.rows, cols) }
func (t *table) row(cols ...string)    { t.rows = append(t.rows, cols) }

func (t *table) flush() {
	if len(t.rows) == 0 {
		return
	}
	n := len(t.rows[0])
	width := make([]int, n)
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for k, r := range t.rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			switch {
			case i == len(r)-1 && i > 0 && n > 4:
				b.WriteString(c)
			case i == 0:
				b.WriteString(c + pad)
			default:
				b.WriteString(pad + c)
			}
			if i < len(r)-1 {
				b.WriteString("  ")
			}
		}
		fmt.Fprintln(t.w, strings.TrimRight(b.String(), " "))
		if k == 0 {
			total := 2 * (n - 1)
			for _, w := range width {
				total += w
			}
			fmt.Fprintln(t.w, strings.Repeat("─", min(total, 160)))
		}
	}
}

// thousands formats v rounded, with thousands separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func f1(v float64) string  { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string  { return strconv.FormatFloat(v, 'f', 2, 64) }
func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 0, 64) + " %" }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
