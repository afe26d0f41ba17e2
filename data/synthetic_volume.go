package data

import (
	"math"
	"math/rand/v2"
)

// Synthetic volumes (SyntheticConfig.Depth > 0): cubes of Size voxels a
// side holding 1 to 3 solids, the 3D twins of the shapes: a ball (class 1),
// an axis-aligned box (class 2) and an octahedron |dz|+|dy|+|dx| <= r
// (class 3), each of about the ball's volume so that no class is much
// rarer in voxels. Sample i is drawn from (Seed, i) alone, in this order:
// the background color, then per solid its kind, size r uniform in
// [Size/8, Size/4], shape, centre (inside the cube, its bounding sphere
// two voxels clear of every earlier solid's; a solid with no such place in
// 20 tries is left out) and color (as the shapes'); then Gaussian noise of
// std Noise on every voxel and channel, clamped to [0, 1].

// octahedronScale is an octahedron's r over the ball's for equal volume:
// (4/3 pi r^3 = 4/3 R^3) gives R = pi^(1/3) r.
const octahedronScale = 1.4645918875615231

// solid is one painted solid of a synthetic volume.
type solid struct {
	class uint8
	c     [3]float64 // centre (z, y, x) in voxel coordinates (centres at k+0.5)
	r     float64    // bounding radius
	half  [3]float64 // a box's half-sides; a ball's or octahedron's radius in [0]
	color [3]float32
}

func (s *solid) contains(z, y, x float64) bool {
	dz, dy, dx := z-s.c[0], y-s.c[1], x-s.c[2]
	switch s.class {
	case ClassCircle:
		return dz*dz+dy*dy+dx*dx <= s.half[0]*s.half[0]
	case ClassRectangle:
		return math.Abs(dz) <= s.half[0] && math.Abs(dy) <= s.half[1] && math.Abs(dx) <= s.half[2]
	case ClassTriangle:
		return math.Abs(dz)+math.Abs(dy)+math.Abs(dx) <= s.half[0]
	}
	return false
}

// solids draws the background color and the solids of one volume.
func (s *Synthetic) solids(rng *rand.Rand) (bg [3]float32, out []solid) {
	n := float64(s.cfg.Size)
	bgMean := uniform(rng, bgMeanLo, bgMeanHi)
	bg = randomColor(rng, bgMean)
	count := 1 + rng.IntN(3)
	for range count {
		so := solid{class: uint8(1 + rng.IntN(s.cfg.Classes-1))}
		r := uniform(rng, n/8, n/4)
		var ext [3]float64 // reach along each axis
		switch so.class {
		case ClassCircle:
			so.half[0], so.r, ext = r, r, [3]float64{r, r, r}
		case ClassRectangle:
			// A cube of the ball's volume has half-side 0.806r; stretch two
			// sides at random, keeping the volume.
			a := 0.806 * r
			so.half = [3]float64{a, a * uniform(rng, 0.8, 1.25), a}
			so.half[2] = a * a * a / (so.half[0] * so.half[1])
			rng.Shuffle(3, func(i, j int) { so.half[i], so.half[j] = so.half[j], so.half[i] })
			so.r, ext = math.Sqrt(so.half[0]*so.half[0]+so.half[1]*so.half[1]+so.half[2]*so.half[2]), so.half
		case ClassTriangle:
			R := r * octahedronScale
			so.half[0], so.r, ext = R, R, [3]float64{R, R, R}
		}
		placed := false
		for range placeTries {
			for a := range 3 {
				so.c[a] = uniform(rng, min(ext[a], n/2), max(n-ext[a], n/2))
			}
			placed = true
			for k := range out {
				if math.Sqrt(sq(so.c[0]-out[k].c[0])+sq(so.c[1]-out[k].c[1])+sq(so.c[2]-out[k].c[2])) < so.r+out[k].r+2 {
					placed = false
					break
				}
			}
			if placed {
				break
			}
		}
		darkLen := max(0, bgMean-minContrast-shapeMeanLo)
		lightLen := max(0, shapeMeanHi-(bgMean+minContrast))
		u := uniform(rng, 0, darkLen+lightLen)
		m := shapeMeanLo + u
		if u >= darkLen {
			m = bgMean + minContrast + (u - darkLen)
		}
		so.color = randomColor(rng, m)
		if placed || len(out) == 0 {
			out = append(out, so)
		}
	}
	return bg, out
}

func sq(v float64) float64 { return v * v }

// generateVolume writes the raw ([0,1]) volume and its mask, slices
// stacked (see Volumes).
func (s *Synthetic) generateVolume(rng *rand.Rand, raw []float32, mask []uint8) {
	bg, solids := s.solids(rng)
	n, d := s.cfg.Size, s.cfg.Depth
	plane := d * n * n
	for v := range plane {
		mask[v] = ClassBackground
		for c := range SyntheticChannels {
			raw[c*plane+v] = bg[c]
		}
	}
	for _, so := range solids {
		var lo, hi [3]int // the solid's bounding box, clipped to the volume
		for a, size := range [3]int{d, n, n} {
			lo[a] = max(0, int(math.Floor(so.c[a]-so.r)))
			hi[a] = min(size, int(math.Ceil(so.c[a]+so.r))+1)
		}
		for z := lo[0]; z < hi[0]; z++ {
			for y := lo[1]; y < hi[1]; y++ {
				for x := lo[2]; x < hi[2]; x++ {
					if !so.contains(float64(z)+0.5, float64(y)+0.5, float64(x)+0.5) {
						continue
					}
					v := (z*n+y)*n + x
					mask[v] = so.class
					for c := range SyntheticChannels {
						raw[c*plane+v] = so.color[c]
					}
				}
			}
		}
	}
	sigma := s.cfg.Noise
	for k, v := range raw {
		raw[k] = min(max(v+float32(sigma*rng.NormFloat64()), 0), 1)
	}
}
