//go:build ignore

// asm_gen writes the GEMM micro-kernels gemm_amd64.s (AVX2+FMA, 6x16) and
// gemm512_amd64.s (AVX-512, 6x32), and the Winograd transforms
// winograd_amd64.s (AVX-512 and AVX2): run `go generate ./backend/cpu/kernels`.
// Both keep the 6 x W tile of C in registers (two vectors per row), step
// over k with two vector loads of packed B, six broadcasts of packed A and
// twelve FMAs, unrolled by 4, then store alpha*acc (+ beta*C) to the first
// `rows` rows of C.
package main

import (
	"fmt"
	"os"
	"strings"
)

type kernel struct {
	file, name, reg, zero string
	vec                   int  // bytes per vector register
	twoPanels             bool // B as two 16-column panels kc*16 floats apart
	// direct reads A unpacked: row i of the tile at a + i*lda, k steps
	// consecutive (a row-major matrix), instead of a packed kc x 6 panel.
	direct bool
	// rows is the tile's height: 6, or 8 for the AVX-512 direct kernel
	// (16 accumulators), whose whole panels suit 16- and 32-row products.
	rows int
	// gather reads B unpacked through a table of offsets: B's row p is the
	// 16 floats at b + offs[p] then the 16 at b + offs[p] + half (a
	// convolution's im2col row, read from the padded image: half is 16
	// where a 32-pixel segment is one output row's, the padded row width
	// where it is two 16-pixel rows), instead of packed panels.
	gather bool
	// quarters (with gather) reads B's row p as four runs of 8 floats,
	// quarter apart: b + offs[p] + r*quarter, r < 4 (a 32-pixel segment
	// of four 8-pixel output rows, quarter the padded row width).
	quarters bool
	// flipped (with gather, 8 rows) reads A through per-k offsets: tile
	// row i's value at k step p is a[aoffs[p] + 9*i], the flipped 3x3
	// weights of an input gradient read in place from w (rows are input
	// channels, 9 values apart), instead of a packed or row-major A.
	flipped bool
	// oneVec keeps a row of the tile in one vector (AVX-512, 16 columns:
	// one packed B panel) instead of two.
	oneVec bool
	doc    string
}

// vecs is the vectors per row of the tile.
func (k kernel) vecs() int {
	if k.oneVec {
		return 1
	}
	return 2
}

// at is off(reg), or (reg) for offset 0.
func at(off int, reg string) string {
	if off == 0 {
		return "(" + reg + ")"
	}
	return fmt.Sprintf("%d(%s)", off, reg)
}

// acc is the accumulator of row i, vector v.
func (k kernel) acc(i, v int) string { return fmt.Sprintf("%s%d", k.reg, 4+k.vecs()*i+v) }

func (k kernel) nrows() int {
	if k.rows == 0 {
		return 6
	}
	return k.rows
}

func main() {
	for _, k := range []kernel{
		{
			file: "gemm_amd64.s", name: "sgemmKernel6x16AVX2", reg: "Y", zero: "VXORPS", vec: 32,
			doc: `// acc (6x16, in Y4..Y15: row i in Y(4+2i) for columns 0-7, Y(5+2i) for
// 8-15) = sum over p < kc of a[p*6+i] * b[p*16+j]; then the first rows rows
// of C = alpha*acc (mode 0) or alpha*acc + beta*C (mode 1).`,
		},
		{
			file: "gemm512_amd64.s", name: "sgemmKernel6x32AVX512", reg: "Z", zero: "VPXORD", vec: 64, twoPanels: true,
			doc: `// The 6x32 tile from one packed A panel (kc x 6) and two adjacent packed B
// panels of 16 columns (b: columns 0-15, kc x 16; b + kc*16: columns
// 16-31): acc in Z4..Z15 (row i in Z(4+2i) for columns 0-15, Z(5+2i) for
// 16-31); then the first rows rows of C = alpha*acc (mode 0) or
// alpha*acc + beta*C (mode 1).`,
		},
	} {
		// Each kernel is followed by its direct-A twin in the same file.
		d := k
		d.name, d.direct = k.name+"Direct", true
		d.doc = "// " + d.name + " is " + k.name + " with A read unpacked: tile row i\n// is a[i*lda+p], p < kc (lda in floats)."
		text := k.gen() + "\n" + d.gen()
		if k.twoPanels {
			g := k
			g.name, g.gather = "sgemmKernel6x32AVX512Gather", true
			g.doc = "// " + g.name + " is " + k.name + " with B read through offsets:\n// B's row p is the 16 floats at b + offs[p], then the 16 at\n// b + offs[p] + half (offs and half in floats)."
			text += "\n" + g.gen()
			e := d
			e.name, e.rows = "sgemmKernel8x32AVX512Direct", 8
			e.doc = "// " + e.name + " is sgemmKernel6x32AVX512Direct over 8 rows: acc in\n// Z4..Z19 (row i in Z(4+2i) for columns 0-15, Z(5+2i) for 16-31)."
			text += "\n" + e.gen()
			n := e
			n.name, n.oneVec, n.twoPanels = "sgemmKernel8x16AVX512Direct", true, false
			n.doc = "// " + n.name + " is sgemmKernel8x32AVX512Direct over one 16-column\n// panel, a row of the tile in one vector: acc in Z4..Z11 (row i in Z(4+i))."
			text += "\n" + n.gen()
			f := e
			f.name, f.gather = "sgemmKernel8x32AVX512Gather", true
			f.doc = "// " + f.name + " is sgemmKernel8x32AVX512Direct with B read through\n// offsets: B's row p is the 16 floats at b + offs[p], then the 16 at\n// b + offs[p] + half (offs and half in floats)."
			text += "\n" + f.gen()
			for _, q := range []kernel{g, f} {
				q.name, q.quarters = strings.TrimSuffix(q.name, "Gather")+"Quarters", true
				q.doc = "// " + q.name + " is " + strings.TrimSuffix(q.name, "Quarters") + "Gather with B's row p the\n// four runs of 8 floats at b + offs[p] + r*quarter, r < 4 (offs and\n// quarter in floats)."
				text += "\n" + q.gen()
			}
			for _, layout := range []string{"Gather", "Quarters"} {
				q := f
				q.direct, q.flipped, q.quarters = false, true, layout == "Quarters"
				q.name = "sgemmKernel8x32AVX512" + layout + "Flipped"
				q.doc = "// " + q.name + " is sgemmKernel8x32AVX512" + layout + " with A read through\n// offsets: tile row i's value at k step p is a[aoffs[p] + 9*i] (in floats),\n// the flipped 3x3 weights of an input gradient read in place."
				text += "\n" + q.gen()
			}
		}
		if err := os.WriteFile(k.file, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := os.WriteFile("winograd_amd64.s", []byte(winogradAsm()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func (k kernel) gen() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	R := func(i int) string { return fmt.Sprintf("%s%d", k.reg, i) }
	if !k.direct && !k.gather { // the file's first kernel
		w("// Code generated by asm_gen.go; DO NOT EDIT.")
		w("")
		w("//go:build amd64 && !noasm")
		w("")
		w(`#include "textflag.h"`)
		w("")
	}
	// Argument offsets: the direct kernels take lda after a, the gather
	// ones offs after b.
	names := []string{"kc", "a"}
	switch {
	case k.direct:
		names = append(names, "lda")
	case k.flipped:
		names = append(names, "aoffs")
	}
	names = append(names, "b")
	switch {
	case k.quarters:
		names = append(names, "offs", "quarter")
	case k.gather:
		names = append(names, "offs", "half")
	}
	names = append(names, "c", "ldc", "alpha", "beta", "mode", "rows")
	argOffs, frame := map[string]int{}, 0
	for _, n := range names {
		argOffs[n] = frame
		if n == "alpha" || n == "beta" {
			frame += 4
		} else {
			frame += 8
		}
	}
	arg := func(name string) string { return fmt.Sprintf("%s+%d(FP)", name, argOffs[name]) }
	types := map[string]string{"a": "*float32", "b": "*float32", "c": "*float32", "offs": "*int", "aoffs": "*int", "alpha": "float32", "beta": "float32"}
	var params []string
	for _, n := range names {
		t := types[n]
		if t == "" {
			t = "int"
		}
		params = append(params, n+" "+t)
	}
	w("// func %s(%s)", k.name, strings.Join(params, ", "))
	w("//")
	w("%s", k.doc)
	loads := "two vector loads of B"
	if k.oneVec {
		loads = "one vector load of B"
	}
	if k.quarters {
		loads = "four half-vector loads of B"
	}
	w("// kc >= 1, 1 <= rows <= %d. Per k step: %s, %d", k.nrows(), loads, k.nrows())
	w("// broadcasts of A, %d FMAs; the k loop is unrolled by 4.", k.vecs()*k.nrows())
	w("TEXT ·%s(SB), NOSPLIT, $0-%d", k.name, frame)
	w("\tMOVQ %s, CX", arg("kc"))
	w("\tMOVQ %s, SI", arg("a"))
	w("\tMOVQ %s, DI", arg("b"))
	w("\tMOVQ %s, DX", arg("c"))
	w("\tMOVQ %s, R8", arg("ldc"))
	w("\tSHLQ $2, R8 // row stride in bytes")
	if k.flipped {
		w("\tMOVQ %s, R12 // A offsets", arg("aoffs"))
	}
	if k.direct {
		// Rows 0-2 at SI, SI+lda, SI+2*lda; rows 3-5 the same from R12.
		w("\tMOVQ %s, R9", arg("lda"))
		w("\tSHLQ $2, R9 // A row stride in bytes")
		w("\tLEAQ (SI)(R9*2), R12")
		w("\tADDQ R9, R12")
		if k.nrows() == 8 {
			w("\tLEAQ (R12)(R9*2), R13 // rows 6-7")
			w("\tADDQ R9, R13")
		}
	}
	bstep := 64 // bytes of packed B per k step and panel
	switch {
	case k.quarters:
		w("\tMOVQ %s, R10 // B row offsets", arg("offs"))
		// R14 (g in ABIInternal) and R15 are scratch in an ABI0 body that
		// touches no globals.
		w("\tMOVQ %s, R15", arg("quarter"))
		w("\tSHLQ $2, R15")
		w("\tLEAQ (DI)(R15*1), R14 // base of columns 8-15")
		w("\tLEAQ (DI)(R15*2), R15 // base of columns 16-23")
	case k.gather:
		w("\tMOVQ %s, R10 // B row offsets", arg("offs"))
		// R14 (g in ABIInternal) is scratch in an ABI0 body.
		w("\tMOVQ %s, R14", arg("half"))
		w("\tLEAQ (DI)(R14*4), R14 // base of columns 16-31")
	}
	if k.twoPanels && !k.gather {
		w("\tMOVQ CX, R10")
		w("\tSHLQ $6, R10 // second B panel: kc*16 floats further")
		w("\tLEAQ (DI)(R10*1), R10")
	}
	w("")
	w("\t// Warm the C rows while the products run.")
	pf := "R9"
	if k.direct && !k.flipped {
		pf = "R11" // free until the stores
	}
	w("\tMOVQ DX, %s", pf)
	for i := 0; i < k.nrows(); i++ {
		w("\tPREFETCHT0 (%s)", pf)
		w("\tPREFETCHT0 %d(%s)", k.vecs()*k.vec-4, pf)
		if i < k.nrows()-1 {
			w("\tADDQ R8, %s", pf)
		}
	}
	w("")
	for r := 4; r < 4+k.vecs()*k.nrows(); r++ {
		w("\t%s %s, %s, %s", k.zero, R(r), R(r), R(r))
	}
	if k.quarters {
		// R11 (the C prefetch pointer above, rows below) is free in the loop.
		w("\tLEAQ (R14)(R15*1), R11")
		w("\tSUBQ DI, R11 // base of columns 24-31")
	}
	w("")
	step := func(ao, bo int) {
		switch {
		case k.quarters:
			w("\tMOVQ %d(R10), AX", bo/bstep*8)
			w("\tVMOVUPS (DI)(AX*4), Y0")
			w("\tVINSERTF64X4 $1, (R14)(AX*4), Z0, Z0")
			w("\tVMOVUPS (R15)(AX*4), Y1")
			w("\tVINSERTF64X4 $1, (R11)(AX*4), Z1, Z1")
		case k.gather:
			// bo/bstep is the step in the unrolled block.
			w("\tMOVQ %d(R10), AX", bo/bstep*8)
			w("\tVMOVUPS (DI)(AX*4), %s", R(0))
			w("\tVMOVUPS (R14)(AX*4), %s", R(1))
		case k.twoPanels:
			w("\tVMOVUPS %d(DI), %s", bo, R(0))
			w("\tVMOVUPS %d(R10), %s", bo, R(1))
		case k.oneVec:
			w("\tVMOVUPS %d(DI), %s", bo, R(0))
		default:
			w("\tVMOVUPS %d(DI), %s", bo, R(0))
			w("\tVMOVUPS %d(DI), %s", bo+32, R(1))
		}
		if k.flipped {
			w("\tMOVQ %d(R12), R13", bo/bstep*8)
		}
		for i := 0; i < k.nrows(); i++ {
			a := R(2 + i%2)
			switch {
			case k.flipped:
				w("\tVBROADCASTSS %d(SI)(R13*4), %s", 36*i, a)
			case k.direct:
				// ao counts packed bytes (24 per k step); A rows step 4.
				u := ao / 24 * 4
				w("\tVBROADCASTSS %d%s, %s", u, [8]string{"(SI)", "(SI)(R9*1)", "(SI)(R9*2)", "(R12)", "(R12)(R9*1)", "(R12)(R9*2)", "(R13)", "(R13)(R9*1)"}[i], a)
			default:
				w("\tVBROADCASTSS %d(SI), %s", ao+4*i, a)
			}
			for v := 0; v < k.vecs(); v++ {
				w("\tVFMADD231PS %s, %s, %s", R(v), a, k.acc(i, v))
			}
		}
	}
	advance := func(n int) {
		switch {
		case k.flipped:
			w("\tADDQ $%d, R12", 8*n)
		case k.direct:
			w("\tADDQ $%d, SI", 4*n)
			w("\tADDQ $%d, R12", 4*n)
			if k.nrows() == 8 {
				w("\tADDQ $%d, R13", 4*n)
			}
		default:
			w("\tADDQ $%d, SI", 24*n)
		}
		switch {
		case k.gather:
			w("\tADDQ $%d, R10", 8*n)
		case k.twoPanels:
			w("\tADDQ $%d, DI", bstep*n)
			w("\tADDQ $%d, R10", bstep*n)
		default:
			w("\tADDQ $%d, DI", bstep*n)
		}
	}
	w("\tMOVQ CX, BX")
	w("\tSHRQ $2, BX")
	w("\tJZ tail")
	w("")
	w("loop4:")
	for u := 0; u < 4; u++ {
		step(24*u, bstep*u)
	}
	advance(4)
	w("\tDECQ BX")
	w("\tJNZ loop4")
	w("")
	w("tail:")
	w("\tANDQ $3, CX")
	w("\tJZ done")
	w("")
	w("loop1:")
	step(0, 0)
	advance(1)
	w("\tDECQ CX")
	w("\tJNZ loop1")
	w("")
	w("done:")
	w("\tVBROADCASTSS %s, %s", arg("alpha"), R(0))
	for r := 4; r < 4+k.vecs()*k.nrows(); r++ {
		w("\tVMULPS %s, %s, %s", R(0), R(r), R(r))
	}
	w("\tMOVQ %s, R11", arg("rows"))
	w("\tMOVQ %s, AX", arg("mode"))
	w("\tTESTQ AX, AX")
	w("\tJNZ withbeta")
	w("")
	for i := 0; i < k.nrows(); i++ {
		for v := 0; v < k.vecs(); v++ {
			w("\tVMOVUPS %s, %s", k.acc(i, v), at(v*k.vec, "DX"))
		}
		if i < k.nrows()-1 {
			w("\tDECQ R11")
			w("\tJZ end")
			w("\tADDQ R8, DX")
		}
	}
	w("\tJMP end")
	w("")
	w("withbeta:")
	w("\tVBROADCASTSS %s, %s", arg("beta"), R(1))
	for i := 0; i < k.nrows(); i++ {
		for v := 0; v < k.vecs(); v++ {
			w("\tVFMADD231PS %s, %s, %s", at(v*k.vec, "DX"), R(1), k.acc(i, v))
		}
		for v := 0; v < k.vecs(); v++ {
			w("\tVMOVUPS %s, %s", k.acc(i, v), at(v*k.vec, "DX"))
		}
		if i < k.nrows()-1 {
			w("\tDECQ R11")
			w("\tJZ end")
			w("\tADDQ R8, DX")
		}
	}
	w("")
	w("end:")
	w("\tVZEROUPPER")
	w("\tRET")
	return b.String()
}

// The Winograd F(2x2,3x3) transforms (winograd.go), AVX-512 (a chunk of
// 16 tiles a vector) and AVX2 (a chunk as two halves of 8 tiles), each the
// pure-Go transform's operations in its order (bit-identical). A chunk's
// tiles 0-7 read (or write) the image side at p and tiles 8-15 at p +
// half; the even and odd columns of a row's 2 values per tile are split
// with VPERMT2PS (AVX-512) or VSHUFPS and VPERMPD (AVX2), and joined back
// for the output with VPERMT2PS or VUNPCKLPS/VUNPCKHPS and VPERM2F128.
//
// Each walks chans channels of rows groups of n chunks (winoWalk): SI
// walks the image side (chunk k of group r at r*rowStep + k*step of the
// channel's plane), DI the transform side (V, M or dM), linearly within a
// channel; the channel, group and counters live in the frame.

// asmWriter collects assembly lines.
type asmWriter struct{ strings.Builder }

func (b *asmWriter) w(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }

// winoFn is one transform: its Go parameters (8-byte slots: pointers,
// ints, a float32 padded), the image-side pointer SI walks and the
// transform-side one DI does, and how DI steps per chunk.
type winoFn struct {
	name, doc        string
	args             []string
	walked, linear   string // parameters: SI's and DI's start
	walkChan, linChn string // their channel strides (floats)
	linStep          string // DI's step per chunk: a register or $bytes
	a                map[string]string
}

// The frame's locals: the channel's two bases, the group's base, the
// groups left.
const (
	locWChan = "wchan-8(SP)"
	locLChan = "lchan-16(SP)"
	locWRow  = "wrow-24(SP)"
	locRows  = "rows-32(SP)"
)

// begin writes the TEXT line and turns the float strides into bytes (in
// their registers, or in their slots for those the loops read there).
func (f *winoFn) begin(b *asmWriter) {
	f.a = map[string]string{}
	for i, a := range f.args {
		f.a[a] = fmt.Sprintf("%s+%d(FP)", a, 8*i)
	}
	b.w("// func %s(%s)", f.name, strings.Join(f.args, ", "))
	b.w("//")
	b.w("%s", f.doc)
	b.w("TEXT ·%s(SB), NOSPLIT, $32-%d", f.name, 8*len(f.args))
	for _, slot := range []string{"rowStep", f.walkChan, f.linChn} {
		b.w("\tMOVQ %s, AX", f.a[slot])
		b.w("\tSHLQ $2, AX")
		b.w("\tMOVQ AX, %s", f.a[slot])
	}
}

// reg loads parameter name, in bytes, into reg.
func (f *winoFn) reg(b *asmWriter, name, reg string) {
	b.w("\tMOVQ %s, %s", f.a[name], reg)
	b.w("\tSHLQ $2, %s", reg)
}

// loops opens the channel, group and chunk loops (perChan runs at each
// channel's start); body is the chunk's work; then closes them.
func (f *winoFn) loops(b *asmWriter, perChan func(), body func()) {
	b.w("\tMOVQ %s, AX", f.a[f.walked])
	b.w("\tMOVQ AX, %s", locWChan)
	b.w("\tMOVQ %s, AX", f.a[f.linear])
	b.w("\tMOVQ AX, %s", locLChan)
	b.w("")
	b.w("chanloop:")
	if perChan != nil {
		perChan()
	}
	b.w("\tMOVQ %s, AX", locWChan)
	b.w("\tMOVQ AX, %s", locWRow)
	b.w("\tMOVQ %s, DI", locLChan)
	b.w("\tMOVQ %s, AX", f.a["rows"])
	b.w("\tMOVQ AX, %s", locRows)
	b.w("")
	b.w("rowloop:")
	b.w("\tMOVQ %s, SI", locWRow)
	b.w("\tMOVQ %s, CX", f.a["n"])
	b.w("")
	b.w("loop:")
	body()
	b.w("\tADDQ R10, SI")
	b.w("\tADDQ %s, DI", f.linStep)
	b.w("\tDECQ CX")
	b.w("\tJNZ loop")
	b.w("\tMOVQ %s, AX", locWRow)
	b.w("\tADDQ %s, AX", f.a["rowStep"])
	b.w("\tMOVQ AX, %s", locWRow)
	b.w("\tDECQ %s", locRows)
	b.w("\tJNZ rowloop")
	b.w("\tMOVQ %s, AX", locWChan)
	b.w("\tADDQ %s, AX", f.a[f.walkChan])
	b.w("\tMOVQ AX, %s", locWChan)
	b.w("\tMOVQ %s, AX", locLChan)
	b.w("\tADDQ %s, AX", f.a[f.linChn])
	b.w("\tMOVQ AX, %s", locLChan)
	b.w("\tDECQ %s", f.a["chans"])
	b.w("\tJNZ chanloop")
	b.w("\tVZEROUPPER")
	b.w("\tRET")
	b.w("")
}

// xiBases sets DX, R14 and R15 to DI + 4, 8 and 12 times R11 (xiStride
// in bytes), so that position 4i+j is (base_i)(j*R11): j*R11 as (R11*1),
// (R11*2) and R13 = 3*R11.
func (b *asmWriter) xiBases() {
	b.w("\tLEAQ (DI)(R11*4), DX")
	b.w("\tLEAQ (DX)(R11*4), R14")
	b.w("\tLEAQ (R14)(R11*4), R15")
}

// xiAddr is the address of position 4i+j plus off bytes from the bases.
func xiAddr(i, j, off int) string {
	base := [4]string{"DI", "DX", "R14", "R15"}[i]
	idx := [4]string{"", "(R11*1)", "(R11*2)", "(R13*1)"}[j]
	o := ""
	if off != 0 {
		o = fmt.Sprint(off)
	}
	return fmt.Sprintf("%s(%s)%s", o, base, idx)
}

// winoConsts are the permutation tables of the AVX-512 transforms.
func winoConsts(b *asmWriter) {
	tables := []struct {
		name string
		at   func(l int) int
	}{
		{"winoEven", func(l int) int { return 2 * l }},              // even values of two 16-value runs
		{"winoOdd", func(l int) int { return 2*l + 1 }},             // odd values
		{"winoJoinLo", func(l int) int { return l/2 + l%2*16 }},     // a0 b0 a1 b1 .. a7 b7
		{"winoJoinHi", func(l int) int { return 8 + l/2 + l%2*16 }}, // a8 b8 .. a15 b15
	}
	for _, t := range tables {
		for l := 0; l < 16; l++ {
			b.w("DATA %s<>+%d(SB)/4, $%d", t.name, 4*l, t.at(l))
		}
		b.w("GLOBL %s<>(SB), RODATA|NOPTR, $64", t.name)
		b.w("")
	}
	b.w("DATA winoSign<>+0(SB)/4, $0x80000000")
	b.w("GLOBL winoSign<>(SB), RODATA|NOPTR, $4")
	b.w("")
}

func winogradAsm() string {
	var b asmWriter
	b.w("// Code generated by asm_gen.go; DO NOT EDIT.")
	b.w("")
	b.w("//go:build amd64 && !noasm")
	b.w("")
	b.w(`#include "textflag.h"`)
	b.w("")
	winoConsts(&b)
	for _, wide := range []bool{true, false} {
		winoInput(&b, wide)
		winoOutput(&b, wide)
		winoGrad(&b, wide)
	}
	winoConsts4(&b)
	winoInput4(&b)
	winoOutput4(&b)
	winoGrad4(&b)
	return b.String()
}

func isaName(wide bool) string {
	if wide {
		return "AVX512"
	}
	return "AVX2"
}

// winoRow512 computes a row's transform h0..h3 (into dst) of 16 tiles
// from the row at (row) and, for tiles 8-15, (row)(R9*1): E, O, E', O'
// the even and odd values at 0 and 2 further.
func winoRow512(b *asmWriter, row string, dst [4]string) {
	e, o, e2, o2 := "Z0", "Z1", "Z2", "Z3"
	for _, v := range []struct {
		reg, idx string
		off      int
	}{{e, "Z30", 0}, {o, "Z31", 0}, {e2, "Z30", 8}, {o2, "Z31", 8}} {
		b.w("\tVMOVUPS %d(%s), %s", v.off, row, v.reg)
		b.w("\tVPERMT2PS %d(%s)(R9*1), %s, %s", v.off, row, v.idx, v.reg)
	}
	b.w("\tVSUBPS %s, %s, %s // h0 = x0 - x2", e2, e, dst[0])
	b.w("\tVADDPS %s, %s, %s // h1 = x1 + x2", e2, o, dst[1])
	b.w("\tVSUBPS %s, %s, %s // h2 = x2 - x1", o, e2, dst[2])
	b.w("\tVSUBPS %s, %s, %s // h3 = x1 - x3", o2, o, dst[3])
}

// winoRowAVX2 computes a row's transform of 8 tiles from the values at
// (row): the 6 registers of regs are scratch, and h0..h3 end in regs[0],
// regs[3], regs[1], regs[2].
func winoRowAVX2(b *asmWriter, row string, regs [6]string) [4]string {
	x, e, o, x2, e2, o2 := regs[0], regs[1], regs[2], regs[3], regs[4], regs[5]
	b.w("\tVMOVUPS (%s), %s", row, x)
	b.w("\tVSHUFPS $0x88, 32(%s), %s, %s", row, x, e)
	b.w("\tVSHUFPS $0xDD, 32(%s), %s, %s", row, x, o)
	b.w("\tVMOVUPS 8(%s), %s", row, x2)
	b.w("\tVSHUFPS $0x88, 40(%s), %s, %s", row, x2, e2)
	b.w("\tVSHUFPS $0xDD, 40(%s), %s, %s", row, x2, o2)
	for _, r := range []string{e, o, e2, o2} {
		b.w("\tVPERMPD $0xD8, %s, %s", r, r)
	}
	b.w("\tVSUBPS %s, %s, %s // h0 = x0 - x2", e2, e, x)
	b.w("\tVADDPS %s, %s, %s // h1 = x1 + x2", e2, o, x2)
	b.w("\tVSUBPS %s, %s, %s // h2 = x2 - x1", o, e2, e)
	b.w("\tVSUBPS %s, %s, %s // h3 = x1 - x3", o2, o, o)
	return [4]string{x, x2, e, o}
}

// rowAddr sets AX to BX + r*R8 (row r of a window) and returns "AX".
func rowAddr(b *asmWriter, r int) string {
	switch r {
	case 0:
		b.w("\tMOVQ BX, AX")
	case 3:
		b.w("\tLEAQ (BX)(R8*2), AX")
		b.w("\tADDQ R8, AX")
	default:
		b.w("\tLEAQ (BX)(R8*%d), AX", r)
	}
	return "AX"
}

func winoInput(b *asmWriter, wide bool) {
	f := &winoFn{name: "winoInput" + isaName(wide), doc: `// The input transform (see winoInputKernel; strides in floats).`,
		args:   []string{"src", "stride", "half", "step", "rows", "rowStep", "n", "chans", "srcChan", "dst", "xiStride", "panelStride", "dstChan"},
		walked: "src", linear: "dst", walkChan: "srcChan", linChn: "dstChan", linStep: "R12"}
	f.begin(b)
	if wide {
		b.w("\tVMOVUPS winoEven<>(SB), Z30")
		b.w("\tVMOVUPS winoOdd<>(SB), Z31")
	}
	f.reg(b, "stride", "R8")
	f.reg(b, "half", "R9")
	f.reg(b, "step", "R10")
	f.reg(b, "xiStride", "R11")
	b.w("\tLEAQ (R11)(R11*2), R13")
	f.reg(b, "panelStride", "R12")
	f.loops(b, nil, func() {
		b.xiBases()
		if wide {
			h := func(r, j int) string { return fmt.Sprintf("Z%d", 4+4*r+j) }
			b.w("\tMOVQ SI, AX")
			for r := 0; r < 4; r++ {
				winoRow512(b, "AX", [4]string{h(r, 0), h(r, 1), h(r, 2), h(r, 3)})
				if r < 3 {
					b.w("\tADDQ R8, AX")
				}
			}
			for j := 0; j < 4; j++ {
				b.w("\tVSUBPS %s, %s, Z20", h(2, j), h(0, j))
				b.w("\tVMOVUPS Z20, %s", xiAddr(0, j, 0))
				b.w("\tVADDPS %s, %s, Z21", h(2, j), h(1, j))
				b.w("\tVMOVUPS Z21, %s", xiAddr(1, j, 0))
				b.w("\tVSUBPS %s, %s, Z22", h(1, j), h(2, j))
				b.w("\tVMOVUPS Z22, %s", xiAddr(2, j, 0))
				b.w("\tVSUBPS %s, %s, Z23", h(3, j), h(1, j))
				b.w("\tVMOVUPS Z23, %s", xiAddr(3, j, 0))
			}
			return
		}
		for hf := 0; hf < 2; hf++ {
			b.w("\tMOVQ SI, BX")
			if hf == 1 {
				b.w("\tADDQ R9, BX")
			}
			off := 32 * hf
			// Rows 1 and 2 first: every output needs one of them.
			h1 := winoRowAVX2(b, rowAddr(b, 1), [6]string{"Y0", "Y1", "Y2", "Y3", "Y4", "Y5"})
			h2 := winoRowAVX2(b, rowAddr(b, 2), [6]string{"Y6", "Y7", "Y8", "Y9", "Y10", "Y11"})
			for j := 0; j < 4; j++ {
				b.w("\tVADDPS %s, %s, Y12", h2[j], h1[j])
				b.w("\tVMOVUPS Y12, %s", xiAddr(1, j, off))
				b.w("\tVSUBPS %s, %s, Y13", h1[j], h2[j])
				b.w("\tVMOVUPS Y13, %s", xiAddr(2, j, off))
			}
			used := map[string]bool{}
			for _, r := range append(h1[:], h2[:]...) {
				used[r] = true
			}
			var free [6]string
			for i, n := 0, 0; n < 6; i++ {
				if r := fmt.Sprintf("Y%d", i); !used[r] {
					free[n] = r
					n++
				}
			}
			h0 := winoRowAVX2(b, rowAddr(b, 0), free)
			for j := 0; j < 4; j++ {
				b.w("\tVSUBPS %s, %s, Y15", h2[j], h0[j])
				b.w("\tVMOVUPS Y15, %s", xiAddr(0, j, off))
			}
			h3 := winoRowAVX2(b, rowAddr(b, 3), free)
			for j := 0; j < 4; j++ {
				b.w("\tVSUBPS %s, %s, Y15", h3[j], h1[j])
				b.w("\tVMOVUPS Y15, %s", xiAddr(3, j, off))
			}
		}
	})
}

// winoOutputLoads computes a chunk's P (the columns' transforms of M) from
// the positions at the bases plus off bytes: P0j into p0[j], P1j into
// p1[j].
func winoOutputLoads(b *asmWriter, off int, p0, p1 [4]string) {
	for j := 0; j < 4; j++ {
		b.w("\tVMOVUPS %s, %s", xiAddr(0, j, off), p0[j])
		b.w("\tVADDPS %s, %s, %s", xiAddr(1, j, off), p0[j], p0[j])
		b.w("\tVADDPS %s, %s, %s // P0j = (M0j + M1j) + M2j", xiAddr(2, j, off), p0[j], p0[j])
		b.w("\tVMOVUPS %s, %s", xiAddr(1, j, off), p1[j])
		b.w("\tVSUBPS %s, %s, %s", xiAddr(2, j, off), p1[j], p1[j])
		b.w("\tVSUBPS %s, %s, %s // P1j = (M1j - M2j) - M3j", xiAddr(3, j, off), p1[j], p1[j])
	}
}

// winoOutputRow computes a row's two outputs from p into y0 and y1, plus
// the bias (in bias) where BX is not zero.
func winoOutputRow(b *asmWriter, p [4]string, y0, y1, bias, skip string) {
	b.w("\tVADDPS %s, %s, %s", p[1], p[0], y0)
	b.w("\tVADDPS %s, %s, %s // y0 = (p0 + p1) + p2", p[2], y0, y0)
	b.w("\tVSUBPS %s, %s, %s", p[2], p[1], y1)
	b.w("\tVSUBPS %s, %s, %s // y1 = (p1 - p2) - p3", p[3], y1, y1)
	b.w("\tTESTQ BX, BX")
	b.w("\tJZ %s", skip)
	b.w("\tVADDPS %s, %s, %s", bias, y0, y0)
	b.w("\tVADDPS %s, %s, %s", bias, y1, y1)
	b.w("%s:", skip)
}

func winoOutput(b *asmWriter, wide bool) {
	f := &winoFn{name: "winoOutput" + isaName(wide), doc: `// The output transform (see winoOutputKernel; strides in floats; bias
// read where addBias is 1, a value per channel).`,
		args:   []string{"dst", "stride", "half", "step", "rows", "rowStep", "n", "chans", "dstChan", "m", "xiStride", "mChan", "bias", "addBias"},
		walked: "dst", linear: "m", walkChan: "dstChan", linChn: "mChan", linStep: "$64"}
	f.begin(b)
	reg, biasReg := "Y", "Y15"
	if wide {
		reg, biasReg = "Z", "Z27"
		b.w("\tVMOVUPS winoJoinLo<>(SB), Z28")
		b.w("\tVMOVUPS winoJoinHi<>(SB), Z29")
	}
	R := func(i int) string { return fmt.Sprintf("%s%d", reg, i) }
	f.reg(b, "stride", "R8")
	f.reg(b, "half", "R9")
	f.reg(b, "step", "R10")
	f.reg(b, "xiStride", "R11")
	b.w("\tLEAQ (R11)(R11*2), R13")
	b.w("\tMOVQ %s, BX", f.a["addBias"])
	perChan := func() {
		b.w("\tTESTQ BX, BX")
		b.w("\tJZ nobias")
		b.w("\tMOVQ %s, AX", f.a["bias"])
		b.w("\tVBROADCASTSS (AX), %s", biasReg)
		b.w("\tADDQ $4, AX")
		b.w("\tMOVQ AX, %s", f.a["bias"])
		b.w("nobias:")
	}
	f.loops(b, perChan, func() {
		b.xiBases()
		halves := 2
		if wide {
			halves = 1
		}
		for hf := 0; hf < halves; hf++ {
			p0, p1 := [4]string{R(0), R(1), R(2), R(3)}, [4]string{R(4), R(5), R(6), R(7)}
			winoOutputLoads(b, 32*hf, p0, p1)
			winoOutputRow(b, p0, R(8), R(9), biasReg, fmt.Sprintf("bias0h%d", hf))
			winoOutputRow(b, p1, R(10), R(11), biasReg, fmt.Sprintf("bias1h%d", hf))
			b.w("\tMOVQ SI, AX")
			if wide {
				for r, y := range [][2]string{{R(8), R(9)}, {R(10), R(11)}} {
					if r == 1 {
						b.w("\tADDQ R8, AX")
					}
					b.w("\tVMOVAPS %s, Z12", y[0])
					b.w("\tVPERMT2PS %s, Z28, Z12", y[1])
					b.w("\tVMOVAPS %s, Z13", y[0])
					b.w("\tVPERMT2PS %s, Z29, Z13", y[1])
					b.w("\tVMOVUPS Z12, (AX)")
					b.w("\tVMOVUPS Z13, (AX)(R9*1)")
				}
				continue
			}
			if hf == 1 {
				b.w("\tADDQ R9, AX")
			}
			for r, y := range [][2]string{{R(8), R(9)}, {R(10), R(11)}} {
				if r == 1 {
					b.w("\tADDQ R8, AX")
				}
				b.w("\tVUNPCKLPS %s, %s, Y12", y[1], y[0])
				b.w("\tVUNPCKHPS %s, %s, Y13", y[1], y[0])
				b.w("\tVPERM2F128 $0x20, Y13, Y12, Y14")
				b.w("\tVMOVUPS Y14, (AX)")
				b.w("\tVPERM2F128 $0x31, Y13, Y12, Y14")
				b.w("\tVMOVUPS Y14, 32(AX)")
			}
		}
	})
}

// winoGradStores computes dM from q0..q3 (q[i] the pair qi0, qi1) and
// stores it at the bases plus off bytes; tmp is scratch; neg(x, dst)
// negates as Go's -x does (the sign bit flipped).
func winoGradStores(b *asmWriter, q [4][2]string, tmp string, off int, neg func(x, dst string)) {
	for i := 0; i < 4; i++ {
		b.w("\tVMOVUPS %s, %s", q[i][0], xiAddr(i, 0, off))
		b.w("\tVADDPS %s, %s, %s", q[i][1], q[i][0], tmp)
		b.w("\tVMOVUPS %s, %s", tmp, xiAddr(i, 1, off))
		b.w("\tVSUBPS %s, %s, %s", q[i][1], q[i][0], tmp)
		b.w("\tVMOVUPS %s, %s", tmp, xiAddr(i, 2, off))
		neg(q[i][1], tmp)
		b.w("\tVMOVUPS %s, %s", tmp, xiAddr(i, 3, off))
	}
}

func winoGrad(b *asmWriter, wide bool) {
	f := &winoFn{name: "winoGrad" + isaName(wide), doc: `// The gradient transform dM = A dY A^T (see winoGradKernel; strides in
// floats).`,
		args:   []string{"src", "stride", "half", "step", "rows", "rowStep", "n", "chans", "srcChan", "dst", "xiStride", "dstChan"},
		walked: "src", linear: "dst", walkChan: "srcChan", linChn: "dstChan", linStep: "$64"}
	f.begin(b)
	reg := "Y"
	if wide {
		reg = "Z"
		b.w("\tVMOVUPS winoEven<>(SB), Z30")
		b.w("\tVMOVUPS winoOdd<>(SB), Z31")
		b.w("\tVPBROADCASTD winoSign<>(SB), Z29")
	} else {
		b.w("\tVBROADCASTSS winoSign<>(SB), Y15")
	}
	R := func(i int) string { return fmt.Sprintf("%s%d", reg, i) }
	neg := func(x, dst string) {
		if wide {
			b.w("\tVPXORD Z29, %s, %s", x, dst)
		} else {
			b.w("\tVXORPS Y15, %s, %s", x, dst)
		}
	}
	f.reg(b, "stride", "R8")
	f.reg(b, "half", "R9")
	f.reg(b, "step", "R10")
	f.reg(b, "xiStride", "R11")
	b.w("\tLEAQ (R11)(R11*2), R13")
	f.loops(b, nil, func() {
		b.xiBases()
		halves := 2
		if wide {
			halves = 1
		}
		for hf := 0; hf < halves; hf++ {
			b.w("\tMOVQ SI, AX")
			if hf == 1 {
				b.w("\tADDQ R9, AX")
			}
			// y[a][b]: row a's even (b 0) and odd (b 1) values.
			y := [2][2]string{{R(0), R(1)}, {R(2), R(3)}}
			for r := 0; r < 2; r++ {
				if r == 1 {
					b.w("\tADDQ R8, AX")
				}
				if wide {
					for c, idx := range []string{"Z30", "Z31"} {
						b.w("\tVMOVUPS (AX), %s", y[r][c])
						b.w("\tVPERMT2PS (AX)(R9*1), %s, %s", idx, y[r][c])
					}
					continue
				}
				b.w("\tVMOVUPS (AX), Y4")
				b.w("\tVSHUFPS $0x88, 32(AX), Y4, %s", y[r][0])
				b.w("\tVSHUFPS $0xDD, 32(AX), Y4, %s", y[r][1])
				b.w("\tVPERMPD $0xD8, %s, %s", y[r][0], y[r][0])
				b.w("\tVPERMPD $0xD8, %s, %s", y[r][1], y[r][1])
			}
			var q [4][2]string
			for c := 0; c < 2; c++ {
				q[0][c] = y[0][c]
				q[1][c], q[2][c], q[3][c] = R(4+c), R(6+c), R(8+c)
				b.w("\tVADDPS %s, %s, %s // q1 = y0 + y1", y[1][c], y[0][c], q[1][c])
				b.w("\tVSUBPS %s, %s, %s // q2 = y0 - y1", y[1][c], y[0][c], q[2][c])
				neg(y[1][c], q[3][c])
			}
			winoGradStores(b, q, R(10), 32*hf, neg)
		}
	})
}

// The F(4x4,3x3) transforms (winograd4.go), AVX2 on either instruction
// set: a chunk as two halves of 8 tiles, tile q of a half in lane
// winoLane4(q). The input transform takes each ξ row i in turn: v_i =
// B^T d of the window's columns, as five vectors of 8 columns (0, 8, 16,
// 24 and 26, the last for columns 32 and 33), the first four transposed
// within their 128-bit halves into the tiles' columns x0..x3, x4 and x5
// permuted from x0, x1 and the fifth; then B^T along the row. The output
// transform takes the output rows two at a time: P = A^T M of the six
// columns, A^T along each row, then the in-half transpose back to the
// image's order. Multiplications are by powers of two, fused.

// winoConsts4 are the F(4x4,3x3) transforms' constants.
func winoConsts4(b *asmWriter) {
	for _, t := range []struct {
		name string
		at   func(l int) int
	}{
		{"wino4Shift", func(l int) int { return []int{4, 5, 6, 7, 1, 2, 3, 0}[l] }}, // the next tile's lane
		{"wino4Lane6", func(int) int { return 6 }},
		{"wino4Lane7", func(int) int { return 7 }},
	} {
		for l := 0; l < 8; l++ {
			b.w("DATA %s<>+%d(SB)/4, $%d", t.name, 4*l, t.at(l))
		}
		b.w("GLOBL %s<>(SB), RODATA|NOPTR, $32", t.name)
		b.w("")
	}
	for _, c := range []struct {
		name string
		bits uint32
	}{{"wino4Two", 0x40000000}, {"wino4Four", 0x40800000}, {"wino4Eight", 0x41000000}} {
		for l := 0; l < 8; l++ {
			b.w("DATA %s<>+%d(SB)/4, $0x%08x", c.name, 4*l, c.bits)
		}
		b.w("GLOBL %s<>(SB), RODATA|NOPTR, $32", c.name)
		b.w("")
	}
}

// xi4Addr is position 6i+j's address from DX (row i's base), off bytes
// further: j*xiStride as (R11*1), (R11*2), R13 = 3x, (R11*4), R14 = 5x.
func xi4Addr(j, off int) string {
	idx := [6]string{"", "(R11*1)", "(R11*2)", "(R13*1)", "(R11*4)", "(R14*1)"}[j]
	o := ""
	if off != 0 {
		o = fmt.Sprint(off)
	}
	return fmt.Sprintf("%s(DX)%s", o, idx)
}

// winoIn4Column computes v_i = row i of B^T d for the 8 columns at off
// bytes into dst, tmp scratch: window rows 0-2 from BX, 3-5 from AX.
func winoIn4Column(b *asmWriter, i, off int, dst, tmp string) {
	row := func(r int) string {
		base, idx := "BX", ""
		if r >= 3 {
			base, r = "AX", r-3
		}
		if r > 0 {
			idx = fmt.Sprintf("(R8*%d)", r)
		}
		o := ""
		if off != 0 {
			o = fmt.Sprint(off)
		}
		return fmt.Sprintf("%s(%s)%s", o, base, idx)
	}
	// a - b into reg.
	sub := func(a, c int, reg string) {
		b.w("\tVMOVUPS %s, %s", row(a), reg)
		b.w("\tVSUBPS %s, %s, %s", row(c), reg, reg)
	}
	switch i {
	case 0: // d42 + 4*d02
		sub(4, 2, dst)
		sub(0, 2, tmp)
		b.w("\tVFMADD231PS Y12, %s, %s", tmp, dst)
	case 1, 2: // (x4 - 4*x2) ± (x3 - 4*x1)
		b.w("\tVMOVUPS %s, %s", row(4), dst)
		b.w("\tVFNMADD231PS %s, Y12, %s", row(2), dst)
		b.w("\tVMOVUPS %s, %s", row(3), tmp)
		b.w("\tVFNMADD231PS %s, Y12, %s", row(1), tmp)
		if i == 1 {
			b.w("\tVADDPS %s, %s, %s", tmp, dst, dst)
		} else {
			b.w("\tVSUBPS %s, %s, %s", tmp, dst, dst)
		}
	case 3, 4: // d42 ∓ 2*d13
		sub(4, 2, dst)
		sub(1, 3, tmp)
		if i == 3 {
			b.w("\tVFNMADD231PS Y11, %s, %s", tmp, dst)
		} else {
			b.w("\tVFMADD231PS Y11, %s, %s", tmp, dst)
		}
	case 5: // d53 + 4*d13
		sub(5, 3, dst)
		sub(1, 3, tmp)
		b.w("\tVFMADD231PS Y12, %s, %s", tmp, dst)
	}
}

// transpose4x4 transposes a, b, c, d within their 128-bit halves into
// the registers of out, with t scratch (four registers).
func transpose4x4(b *asmWriter, in, out, t [4]string) {
	b.w("\tVUNPCKLPS %s, %s, %s", in[1], in[0], t[0])
	b.w("\tVUNPCKHPS %s, %s, %s", in[1], in[0], t[1])
	b.w("\tVUNPCKLPS %s, %s, %s", in[3], in[2], t[2])
	b.w("\tVUNPCKHPS %s, %s, %s", in[3], in[2], t[3])
	b.w("\tVUNPCKLPD %s, %s, %s", t[2], t[0], out[0])
	b.w("\tVUNPCKHPD %s, %s, %s", t[2], t[0], out[1])
	b.w("\tVUNPCKLPD %s, %s, %s", t[3], t[1], out[2])
	b.w("\tVUNPCKHPD %s, %s, %s", t[3], t[1], out[3])
}

// halfBases points BX at half hf's first image row (SI, plus R9 for the
// second half), AX at its row r (R8 a row) and DX at DI.
func halfBases(b *asmWriter, hf, r int) {
	b.w("\tMOVQ SI, BX")
	if hf == 1 {
		b.w("\tADDQ R9, BX")
	}
	b.w("\tLEAQ (BX)(R8*2), AX")
	if r == 3 {
		b.w("\tADDQ R8, AX")
	}
	b.w("\tMOVQ DI, DX")
}

// regs4 loads what the F(4x4,3x3) input and gradient transforms keep in
// registers: 4 and 2 in Y12 and Y11, the strides in bytes (R8 the image
// rows', R9 half, R10 step, R11 xiStride) and 3, 5 and 6 times xiStride
// in R13, R14 and R15 (xi4Addr's).
func (f *winoFn) regs4(b *asmWriter) {
	b.w("\tVMOVUPS wino4Four<>(SB), Y12")
	b.w("\tVMOVUPS wino4Two<>(SB), Y11")
	f.reg(b, "stride", "R8")
	f.reg(b, "half", "R9")
	f.reg(b, "step", "R10")
	f.reg(b, "xiStride", "R11")
	b.w("\tLEAQ (R11)(R11*2), R13")
	b.w("\tLEAQ (R11)(R11*4), R14")
	b.w("\tLEAQ (R13)(R13*1), R15")
}

func winoInput4(b *asmWriter) {
	f := &winoFn{name: "winoInput4AVX2", doc: `// F(4x4,3x3)'s input transform (see winoInput4Go; strides in floats).`,
		args:   []string{"src", "stride", "half", "step", "rows", "rowStep", "n", "chans", "srcChan", "dst", "xiStride", "panelStride", "dstChan"},
		walked: "src", linear: "dst", walkChan: "srcChan", linChn: "dstChan", linStep: "R12"}
	f.begin(b)
	b.w("\tVMOVUPS wino4Shift<>(SB), Y15")
	b.w("\tVMOVUPS wino4Lane6<>(SB), Y14")
	b.w("\tVMOVUPS wino4Lane7<>(SB), Y13")
	f.regs4(b)
	f.reg(b, "panelStride", "R12")
	f.loops(b, nil, func() {
		for hf := 0; hf < 2; hf++ {
			halfBases(b, hf, 3)
			off := 32 * hf
			for i := 0; i < 6; i++ {
				if i > 0 {
					b.w("\tADDQ R15, DX")
				}
				b.w("\t// ξ row %d", i)
				for v, col := range []int{0, 8, 16, 24, 26} {
					winoIn4Column(b, i, 4*col, fmt.Sprintf("Y%d", v), "Y5")
				}
				transpose4x4(b, [4]string{"Y0", "Y1", "Y2", "Y3"}, [4]string{"Y0", "Y1", "Y2", "Y3"}, [4]string{"Y5", "Y6", "Y7", "Y8"})
				// x4 and x5: the next tile's x0 and x1, tile 8's from columns 32 and 33.
				b.w("\tVPERMPS Y0, Y15, Y5")
				b.w("\tVPERMPS Y4, Y14, Y6")
				b.w("\tVBLENDPS $0x80, Y6, Y5, Y5")
				b.w("\tVPERMPS Y1, Y15, Y6")
				b.w("\tVPERMPS Y4, Y13, Y7")
				b.w("\tVBLENDPS $0x80, Y7, Y6, Y6")
				// x0..x5 in Y0, Y1, Y2, Y3, Y5, Y6: B^T along the row (winoIn4).
				b.w("\tVSUBPS Y2, Y0, Y7 // d02")
				b.w("\tVSUBPS Y2, Y5, Y8 // d42")
				b.w("\tVMOVAPS Y8, Y9")
				b.w("\tVFMADD231PS Y12, Y7, Y9 // h0 = d42 + 4*d02")
				b.w("\tVMOVUPS Y9, %s", xi4Addr(0, off))
				b.w("\tVSUBPS Y3, Y1, Y7 // d13")
				b.w("\tVMOVAPS Y8, Y9")
				b.w("\tVFNMADD231PS Y11, Y7, Y9 // h3 = d42 - 2*d13")
				b.w("\tVMOVUPS Y9, %s", xi4Addr(3, off))
				b.w("\tVFMADD231PS Y11, Y7, Y8 // h4 = d42 + 2*d13")
				b.w("\tVMOVUPS Y8, %s", xi4Addr(4, off))
				b.w("\tVSUBPS Y3, Y6, Y9 // d53")
				b.w("\tVFMADD231PS Y12, Y7, Y9 // h5 = d53 + 4*d13")
				b.w("\tVMOVUPS Y9, %s", xi4Addr(5, off))
				b.w("\tVFNMADD231PS Y12, Y2, Y5 // t0 = x4 - 4*x2")
				b.w("\tVFNMADD231PS Y12, Y1, Y3 // t1 = x3 - 4*x1")
				b.w("\tVADDPS Y3, Y5, Y7 // h1 = t0 + t1")
				b.w("\tVMOVUPS Y7, %s", xi4Addr(1, off))
				b.w("\tVSUBPS Y3, Y5, Y8 // h2 = t0 - t1")
				b.w("\tVMOVUPS Y8, %s", xi4Addr(2, off))
			}
		}
	})
}

// winoOut4Row computes A^T p (winoOut4) of the six registers of p, adds
// the bias (broadcast into t[3]) where BX is not zero, transposes the
// four outputs back within their halves and stores the 32 floats at AX:
// the four registers of t are scratch, and so are p's once read.
func winoOut4Row(b *asmWriter, p [6]string, t [4]string, skip string) {
	b.w("\tVADDPS %s, %s, %s // s12", p[2], p[1], t[0])
	b.w("\tVSUBPS %s, %s, %s // d12", p[2], p[1], p[2])
	b.w("\tVADDPS %s, %s, %s // s34", p[4], p[3], t[1])
	b.w("\tVSUBPS %s, %s, %s // d34", p[4], p[3], p[4])
	b.w("\tVADDPS %s, %s, %s", t[0], p[0], p[0])
	b.w("\tVADDPS %s, %s, %s // y0 = (p0 + s12) + s34", t[1], p[0], p[0])
	b.w("\tVMOVAPS %s, %s", p[2], p[1])
	b.w("\tVFMADD231PS wino4Two<>(SB), %s, %s // y1 = d12 + 2*d34", p[4], p[1])
	b.w("\tVFMADD231PS wino4Four<>(SB), %s, %s // y2 = s12 + 4*s34", t[1], t[0])
	b.w("\tVFMADD231PS wino4Eight<>(SB), %s, %s", p[4], p[2])
	b.w("\tVADDPS %s, %s, %s // y3 = (d12 + 8*d34) + p5", p[5], p[2], p[2])
	y := [4]string{p[0], p[1], t[0], p[2]}
	b.w("\tTESTQ BX, BX")
	b.w("\tJZ %s", skip)
	b.w("\tVBROADCASTSS (R13), %s", t[3])
	for _, r := range y {
		b.w("\tVADDPS %s, %s, %s", t[3], r, r)
	}
	b.w("%s:", skip)
	out := [4]string{t[2], t[3], p[0], p[1]}
	transpose4x4(b, y, out, [4]string{p[3], p[4], p[5], t[1]})
	for k, r := range out {
		b.w("\tVMOVUPS %s, %d(AX)", r, 32*k)
	}
}

func winoOutput4(b *asmWriter) {
	f := &winoFn{name: "winoOutput4AVX2", doc: `// F(4x4,3x3)'s output transform (see winoOutput4Go; strides in floats;
// bias read where addBias is 1, a value per channel).`,
		args:   []string{"dst", "stride", "half", "step", "rows", "rowStep", "n", "chans", "dstChan", "m", "xiStride", "mChan", "bias", "addBias"},
		walked: "dst", linear: "m", walkChan: "dstChan", linChn: "mChan", linStep: "$64"}
	f.begin(b)
	f.reg(b, "stride", "R8")
	f.reg(b, "half", "R9")
	f.reg(b, "step", "R10")
	f.reg(b, "xiStride", "R11")
	b.w("\tLEAQ (R11)(R11*2), R15")
	b.w("\tSHLQ $1, R15 // a row of ξ: 6 positions")
	b.w("\tMOVQ %s, BX", f.a["addBias"])
	perChan := func() {
		// R13: this channel's bias; the slot moves on to the next.
		b.w("\tTESTQ BX, BX")
		b.w("\tJZ nobias")
		b.w("\tMOVQ %s, R13", f.a["bias"])
		b.w("\tLEAQ 4(R13), AX")
		b.w("\tMOVQ AX, %s", f.a["bias"])
		b.w("nobias:")
	}
	Y := func(i int) string { return fmt.Sprintf("Y%d", i) }
	t := [4]string{"Y0", "Y1", "Y2", "Y3"}
	f.loops(b, perChan, func() {
		for hf := 0; hf < 2; hf++ {
			for pass := 0; pass < 2; pass++ {
				// Column j: M[i][j] at DX + i*R15 (i < 3) and R12 + (i-3)*R15.
				b.w("\tLEAQ %d(DI), DX", 32*hf)
				b.w("\tLEAQ (R15)(R15*2), R12")
				b.w("\tADDQ DX, R12")
				var pa, pb [6]string // P rows 2*pass and 2*pass+1
				for j := 0; j < 6; j++ {
					pa[j], pb[j] = Y(4+j), Y(10+j)
					if j > 0 {
						b.w("\tADDQ R11, DX")
						b.w("\tADDQ R11, R12")
					}
					b.w("\tVMOVUPS (DX)(R15*1), Y0")
					b.w("\tVADDPS (DX)(R15*2), Y0, Y2 // s12")
					b.w("\tVSUBPS (DX)(R15*2), Y0, Y0 // d12")
					b.w("\tVMOVUPS (R12), Y1")
					b.w("\tVADDPS (R12)(R15*1), Y1, Y3 // s34")
					b.w("\tVSUBPS (R12)(R15*1), Y1, Y1 // d34")
					if pass == 0 {
						b.w("\tVADDPS (DX), Y2, %s", pa[j])
						b.w("\tVADDPS Y3, %s, %s // P0 = (m0 + s12) + s34", pa[j], pa[j])
						b.w("\tVMOVAPS Y0, %s", pb[j])
						b.w("\tVFMADD231PS wino4Two<>(SB), Y1, %s // P1 = d12 + 2*d34", pb[j])
						continue
					}
					b.w("\tVMOVAPS Y2, %s", pa[j])
					b.w("\tVFMADD231PS wino4Four<>(SB), Y3, %s // P2 = s12 + 4*s34", pa[j])
					b.w("\tVMOVAPS Y0, %s", pb[j])
					b.w("\tVFMADD231PS wino4Eight<>(SB), Y1, %s", pb[j])
					b.w("\tVADDPS (R12)(R15*2), %s, %s // P3 = (d12 + 8*d34) + m5", pb[j], pb[j])
				}
				for k, p := range [2][6]string{pa, pb} {
					a := 2*pass + k
					b.w("\tMOVQ SI, AX")
					if hf == 1 {
						b.w("\tADDQ R9, AX")
					}
					if a >= 2 {
						b.w("\tLEAQ (AX)(R8*2), AX")
					}
					if a%2 == 1 {
						b.w("\tADDQ R8, AX")
					}
					winoOut4Row(b, p, t, fmt.Sprintf("bias%dh%d", a, hf))
				}
			}
		}
	})
}

// winoGrad4Row computes dM's row i (A along the row, winoGradCol4) from
// the tiles' four columns in z, storing it at DX + off; t is scratch
// (three registers), z[1] and z[2] too.
func winoGrad4Row(b *asmWriter, z [4]string, t [3]string, off int) {
	b.w("\tVMOVUPS %s, %s", z[0], xi4Addr(0, off))
	b.w("\tVMOVUPS %s, %s", z[3], xi4Addr(5, off))
	b.w("\tVADDPS %s, %s, %s // e", z[2], z[0], t[0])
	b.w("\tVADDPS %s, %s, %s // o", z[3], z[1], t[1])
	b.w("\tVADDPS %s, %s, %s // q1 = e + o", t[1], t[0], t[2])
	b.w("\tVMOVUPS %s, %s", t[2], xi4Addr(1, off))
	b.w("\tVSUBPS %s, %s, %s // q2 = e - o", t[1], t[0], t[2])
	b.w("\tVMOVUPS %s, %s", t[2], xi4Addr(2, off))
	b.w("\tVFMADD231PS Y12, %s, %s // e4 = y0 + 4*y2", z[2], z[0])
	b.w("\tVFMADD231PS Y12, %s, %s // o4 = y1 + 4*y3", z[3], z[1])
	b.w("\tVMOVAPS %s, %s", z[0], t[0])
	b.w("\tVFMADD231PS Y11, %s, %s // q3 = e4 + 2*o4", z[1], t[0])
	b.w("\tVMOVUPS %s, %s", t[0], xi4Addr(3, off))
	b.w("\tVFNMADD231PS Y11, %s, %s // q4 = e4 - 2*o4", z[1], z[0])
	b.w("\tVMOVUPS %s, %s", z[0], xi4Addr(4, off))
}

func winoGrad4(b *asmWriter) {
	f := &winoFn{name: "winoGrad4AVX2", doc: `// F(4x4,3x3)'s gradient transform dM = A dY A^T (see winoGrad4Go; strides
// in floats).`,
		args:   []string{"src", "stride", "half", "step", "rows", "rowStep", "n", "chans", "srcChan", "dst", "xiStride", "dstChan"},
		walked: "src", linear: "dst", walkChan: "srcChan", linChn: "dstChan", linStep: "$64"}
	f.begin(b)
	f.regs4(b)
	f.loops(b, nil, func() {
		for hf := 0; hf < 2; hf++ {
			// BX: dY's rows 0 and 1 (R8 apart), AX: rows 2 and 3.
			halfBases(b, hf, 2)
			off := 32 * hf
			row := func(a, v int) string {
				base, idx := "BX", ""
				if a >= 2 {
					base, a = "AX", a-2
				}
				if a == 1 {
					idx = "(R8*1)"
				}
				o := ""
				if v != 0 {
					o = fmt.Sprint(32 * v)
				}
				return fmt.Sprintf("%s(%s)%s", o, base, idx)
			}
			for i := 0; i < 6; i++ {
				if i > 0 {
					b.w("\tADDQ R15, DX")
				}
				b.w("\t// ξ row %d: Q_i = A's row i over dY's rows, 8 columns a vector", i)
				for v := 0; v < 4; v++ {
					q := fmt.Sprintf("Y%d", v)
					switch i {
					case 0:
						b.w("\tVMOVUPS %s, %s", row(0, v), q)
					case 5:
						b.w("\tVMOVUPS %s, %s", row(3, v), q)
					case 1, 2:
						b.w("\tVMOVUPS %s, %s", row(0, v), q)
						b.w("\tVADDPS %s, %s, %s // e", row(2, v), q, q)
						b.w("\tVMOVUPS %s, Y4", row(1, v))
						b.w("\tVADDPS %s, Y4, Y4 // o", row(3, v))
						if i == 1 {
							b.w("\tVADDPS Y4, %s, %s", q, q)
						} else {
							b.w("\tVSUBPS Y4, %s, %s", q, q)
						}
					case 3, 4:
						b.w("\tVMOVUPS %s, %s", row(0, v), q)
						b.w("\tVMOVUPS %s, Y5", row(2, v))
						b.w("\tVFMADD231PS Y12, Y5, %s // e4", q)
						b.w("\tVMOVUPS %s, Y4", row(1, v))
						b.w("\tVMOVUPS %s, Y5", row(3, v))
						b.w("\tVFMADD231PS Y12, Y5, Y4 // o4")
						if i == 3 {
							b.w("\tVFMADD231PS Y11, Y4, %s", q)
						} else {
							b.w("\tVFNMADD231PS Y11, Y4, %s", q)
						}
					}
				}
				transpose4x4(b, [4]string{"Y0", "Y1", "Y2", "Y3"}, [4]string{"Y0", "Y1", "Y2", "Y3"}, [4]string{"Y4", "Y5", "Y6", "Y7"})
				winoGrad4Row(b, [4]string{"Y0", "Y1", "Y2", "Y3"}, [3]string{"Y4", "Y5", "Y6"}, off)
			}
		}
	})
}
