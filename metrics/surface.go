package metrics

import (
	"math"
	"slices"
)

// Surface distances between two masks of one class, as MONAI's
// compute_hausdorff_distance(percentile=95) measures them: a voxel of the
// class is on its surface when one of its 6 neighbours inside the volume
// is not of the class; the directed distances are from each surface voxel
// of one mask to the nearest surface voxel of the other, in the voxels'
// physical size (spacing); HD95 is the larger of the two directions' 95th
// percentiles (linear interpolation, numpy's default).

// HD95 is the 95th-percentile Hausdorff distance between the voxels where
// pred and ref hold class c, in a volume of dims (x fastest, then y, then
// z; dims[2] 1 for an image) with the given spacing. ok is false when
// either holds no voxel of c (the distance is undefined).
func HD95(pred, ref []uint8, c uint8, dims [3]int, spacing [3]float64) (d float64, ok bool) {
	sp, sr := surface(pred, c, dims), surface(ref, c, dims)
	if !slices.Contains(sp, true) || !slices.Contains(sr, true) {
		return 0, false
	}
	toRef, toPred := distanceTo(sr, dims, spacing), distanceTo(sp, dims, spacing)
	var ab, ba []float64
	for k := range sp {
		if sp[k] {
			ab = append(ab, math.Sqrt(toRef[k]))
		}
		if sr[k] {
			ba = append(ba, math.Sqrt(toPred[k]))
		}
	}
	return max(percentile(ab, 95), percentile(ba, 95)), true
}

// surface marks the voxels of class c with a 6-neighbour (inside the
// volume) of another class.
func surface(m []uint8, c uint8, dims [3]int) []bool {
	X, Y, Z := dims[0], dims[1], dims[2]
	out := make([]bool, len(m))
	for z := range Z {
		for y := range Y {
			for x := range X {
				k := (z*Y+y)*X + x
				if m[k] != c {
					continue
				}
				out[k] = x > 0 && m[k-1] != c || x < X-1 && m[k+1] != c ||
					y > 0 && m[k-X] != c || y < Y-1 && m[k+X] != c ||
					z > 0 && m[k-X*Y] != c || z < Z-1 && m[k+X*Y] != c
			}
		}
	}
	return out
}

// distanceTo is, for every voxel, the squared physical distance to the
// nearest marked one: Felzenszwalb and Huttenlocher's exact transform, one
// axis at a time.
func distanceTo(marked []bool, dims [3]int, spacing [3]float64) []float64 {
	d := make([]float64, len(marked))
	for k, m := range marked {
		if !m {
			d[k] = math.Inf(1)
		}
	}
	stride := [3]int{1, dims[0], dims[0] * dims[1]}
	for a := range 3 {
		n := dims[a]
		if n == 1 {
			continue
		}
		line, out := make([]float64, n), make([]float64, n)
		v, zs := make([]int, n), make([]float64, n+1)
		w := spacing[a] * spacing[a]
		for start := range len(d) {
			if start/stride[a]%n != 0 { // visit each line once, from its first voxel
				continue
			}
			for i := range n {
				line[i] = d[start+i*stride[a]]
			}
			transform1D(line, out, v, zs, w)
			for i := range n {
				d[start+i*stride[a]] = out[i]
			}
		}
	}
	return d
}

// transform1D is the 1D squared distance transform of f with squared unit
// spacing w: out[q] = min_p f[p] + w(q-p)^2 (the lower envelope of
// parabolas). v and z are scratch of len(f) and len(f)+1.
func transform1D(f, out []float64, v []int, z []float64, w float64) {
	n, k := len(f), -1
	for q := range n {
		if math.IsInf(f[q], 1) {
			continue
		}
		for k >= 0 {
			p := v[k]
			s := ((f[q] + w*float64(q*q)) - (f[p] + w*float64(p*p))) / (2 * w * float64(q-p))
			if s > z[k] {
				k++
				v[k], z[k], z[k+1] = q, s, math.Inf(1)
				break
			}
			k--
		}
		if k < 0 {
			k = 0
			v[0], z[0], z[1] = q, math.Inf(-1), math.Inf(1)
		}
	}
	if k < 0 { // nothing marked on the line
		for q := range out {
			out[q] = f[q]
		}
		return
	}
	j := 0
	for q := range n {
		for z[j+1] < float64(q) {
			j++
		}
		p := v[j]
		out[q] = w*float64((q-p)*(q-p)) + f[p]
	}
}

// percentile is numpy's percentile of xs (linear interpolation); xs is
// sorted in place.
func percentile(xs []float64, p float64) float64 {
	slices.Sort(xs)
	r := p / 100 * float64(len(xs)-1)
	lo := int(math.Floor(r))
	hi := min(lo+1, len(xs)-1)
	return xs[lo] + (r-float64(lo))*(xs[hi]-xs[lo])
}
