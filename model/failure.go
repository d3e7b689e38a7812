package model

import (
	"fmt"
	"math"
	"time"
)

// WeibullFailure returns the probability that a host fails before time t
// under the Weibull availability model that P2P-MPI takes from Nurmi et al.
// (Genaud and Rattanapoka, §4.5, Eq. 1):
//
//	f(t) = Pr([0, t]) = 1 - exp(-(λ·t)^δ)
//
// rate is λ > 0 in failures per second; shape is δ > 0 (δ < 1 in measured
// traces: unreliable machines leave early; δ = 1 is the exponential
// distribution); t ≥ 0. Figure 12 of the chapter uses δ = 1, λ = 10⁻³ s⁻¹,
// t = 100 s, so f = 1 - e^(-0.1) ≈ 0.0952. The result is computed with
// expm1, accurate for small λt.
func WeibullFailure(rate, shape float64, t time.Duration) (float64, error) {
	if !(rate > 0) || math.IsInf(rate, 0) || !(shape > 0) || math.IsInf(shape, 0) || t < 0 {
		return 0, fmt.Errorf("%w: Weibull λ = %v /s, δ = %v, t = %v (want λ > 0, δ > 0, t ≥ 0, finite)", ErrParam, rate, shape, t)
	}
	return -math.Expm1(-math.Pow(rate*t.Seconds(), shape)), nil
}

// AppFailure returns the probability that an MPI application of p processes,
// each replicated r times, crashes, when every host fails independently with
// probability f (P2P-MPI §4.5, Eq. 2): the application crashes if and only
// if all r copies of at least one process fail,
//
//	P_app(p, r) = 1 - (1 - f^r)^p
//
// and r = 1 gives the unreplicated 1 - (1 - f)^p. p ≥ 1, r ≥ 1, 0 ≤ f ≤ 1.
// It is computed as -expm1(p·log1p(-f^r)), accurate when f^r is tiny.
func AppFailure(p, r int, f float64) (float64, error) {
	if p < 1 || r < 1 || !(f >= 0 && f <= 1) {
		return 0, fmt.Errorf("%w: p = %d, r = %d, f = %v (want p ≥ 1, r ≥ 1, 0 ≤ f ≤ 1)", ErrParam, p, r, f)
	}
	fr := math.Pow(f, float64(r))
	if fr == 1 {
		return 1, nil
	}
	return -math.Expm1(float64(p) * math.Log1p(-fr)), nil
}

// AppFailureWeibull is AppFailure with f = WeibullFailure(rate, shape, t),
// the second line of P2P-MPI §4.5, Eq. 2:
//
//	P_app(p, r) = 1 - (1 - (1 - e^(-(λt)^δ))^r)^p
func AppFailureWeibull(p, r int, rate, shape float64, t time.Duration) (float64, error) {
	f, err := WeibullFailure(rate, shape, t)
	if err != nil {
		return 0, err
	}
	return AppFailure(p, r, f)
}
