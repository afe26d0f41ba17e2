//go:build ignore

// asm_gen writes the GEMM micro-kernels gemm_amd64.s (AVX2+FMA, 6x16) and
// gemm512_amd64.s (AVX-512, 6x32): run `go generate ./model/kernels`.
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
	doc     string
}

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
	if k.quarters {
		loads = "four half-vector loads of B"
	}
	w("// kc >= 1, 1 <= rows <= %d. Per k step: %s, %d", k.nrows(), loads, k.nrows())
	w("// broadcasts of A, %d FMAs; the k loop is unrolled by 4.", 2*k.nrows())
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
		w("\tPREFETCHT0 %d(%s)", 2*k.vec-4, pf)
		if i < k.nrows()-1 {
			w("\tADDQ R8, %s", pf)
		}
	}
	w("")
	for r := 4; r < 4+2*k.nrows(); r++ {
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
			w("\tVFMADD231PS %s, %s, %s", R(0), a, R(4+2*i))
			w("\tVFMADD231PS %s, %s, %s", R(1), a, R(5+2*i))
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
	for r := 4; r < 4+2*k.nrows(); r++ {
		w("\tVMULPS %s, %s, %s", R(0), R(r), R(r))
	}
	w("\tMOVQ %s, R11", arg("rows"))
	w("\tMOVQ %s, AX", arg("mode"))
	w("\tTESTQ AX, AX")
	w("\tJNZ withbeta")
	w("")
	for i := 0; i < k.nrows(); i++ {
		w("\tVMOVUPS %s, (DX)", R(4+2*i))
		w("\tVMOVUPS %s, %d(DX)", R(5+2*i), k.vec)
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
		w("\tVFMADD231PS (DX), %s, %s", R(1), R(4+2*i))
		w("\tVFMADD231PS %d(DX), %s, %s", k.vec, R(1), R(5+2*i))
		w("\tVMOVUPS %s, (DX)", R(4+2*i))
		w("\tVMOVUPS %s, %d(DX)", R(5+2*i), k.vec)
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
