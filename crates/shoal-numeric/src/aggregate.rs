//! What PostgreSQL's numeric aggregates compute from their running state: `avg` as the sum
//! divided by the count (`numeric_avg`, `int8_avg`), and the variance / standard deviation
//! family from the count, sum and sum of squares (`numeric_stddev_internal`), including where
//! PostgreSQL returns NULL and the scale it chooses for the quotient and its square root.

use crate::arith::{div_rounded, select_div_scale};
use crate::transcendental::sqrt_rounded;
use crate::{Numeric, NumericError};

impl Numeric {
    /// `avg` for a group with this sum and non-NULL count: `sum / count` at the division's
    /// scale, as `numeric_avg` and the integer averages do. `None` (NULL) for an empty group.
    pub fn avg(sum: &Numeric, count: i64) -> Result<Option<Numeric>, NumericError> {
        if count == 0 {
            return Ok(None);
        }
        sum.div(&Numeric::from_i64(count)).map(Some)
    }
}

/// Running state of `var_samp`, `var_pop`, `stddev_samp` and `stddev_pop` over numeric input:
/// the count, the exact sum and the exact sum of squares, plus whether a NaN or an infinity
/// was seen (PostgreSQL then answers NaN).
#[derive(Clone, Debug)]
pub struct MomentsAccumulator {
    /// Number of non-NULL inputs, specials included.
    pub n: i64,
    /// Exact sum of the finite inputs (its scale is the largest input scale).
    pub sum_x: Numeric,
    /// Exact sum of the squares of the finite inputs (scale twice the largest input scale).
    pub sum_x2: Numeric,
    /// Whether any input was NaN or infinite.
    pub saw_special: bool,
}

impl Default for MomentsAccumulator {
    fn default() -> Self {
        MomentsAccumulator::new()
    }
}

impl MomentsAccumulator {
    /// The state of an empty group.
    pub fn new() -> MomentsAccumulator {
        MomentsAccumulator {
            n: 0,
            sum_x: Numeric::zero(),
            sum_x2: Numeric::zero(),
            saw_special: false,
        }
    }

    /// Adds one non-NULL input (`do_numeric_accum`).
    pub fn push(&mut self, x: &Numeric) -> Result<(), NumericError> {
        self.n += 1;
        if !x.is_finite() {
            self.saw_special = true;
            return Ok(());
        }
        self.sum_x = self.sum_x.add(x)?;
        self.sum_x2 = self.sum_x2.add(&x.mul(x)?)?;
        Ok(())
    }

    /// Combines another group's state into this one (`numeric_combine`).
    pub fn merge(&mut self, other: &MomentsAccumulator) -> Result<(), NumericError> {
        self.n += other.n;
        self.saw_special |= other.saw_special;
        self.sum_x = self.sum_x.add(&other.sum_x)?;
        self.sum_x2 = self.sum_x2.add(&other.sum_x2)?;
        Ok(())
    }

    /// `var_samp`: NULL for fewer than two inputs.
    pub fn var_samp(&self) -> Result<Option<Numeric>, NumericError> {
        self.moment(true, true)
    }

    /// `var_pop`: NULL for no input.
    pub fn var_pop(&self) -> Result<Option<Numeric>, NumericError> {
        self.moment(true, false)
    }

    /// `stddev_samp`: NULL for fewer than two inputs.
    pub fn stddev_samp(&self) -> Result<Option<Numeric>, NumericError> {
        self.moment(false, true)
    }

    /// `stddev_pop`: NULL for no input.
    pub fn stddev_pop(&self) -> Result<Option<Numeric>, NumericError> {
        self.moment(false, false)
    }

    /// `numeric_stddev_internal`: (N·Σx² − (Σx)²) / (N·(N−1) or N²) at the division's scale,
    /// and for a standard deviation the square root of that rounded variance at the same scale.
    fn moment(&self, variance: bool, sample: bool) -> Result<Option<Numeric>, NumericError> {
        if self.n == 0 || (sample && self.n <= 1) {
            return Ok(None);
        }
        if self.saw_special {
            return Ok(Some(Numeric::NaN));
        }
        let n = Numeric::from_i64(self.n);
        // Both products are exact: PostgreSQL's rscale (twice sum_x's scale) loses no digit.
        let numerator = n.mul(&self.sum_x2)?.sub(&self.sum_x.mul(&self.sum_x)?)?;
        if numerator.signum() <= 0 {
            return Ok(Some(Numeric::zero()));
        }
        let denominator = if sample {
            n.mul(&Numeric::from_i64(self.n - 1))?
        } else {
            n.mul(&n)?
        };
        let (
            Numeric::Finite {
                mantissa: a,
                scale: sa,
            },
            Numeric::Finite {
                mantissa: b,
                scale: sb,
            },
        ) = (&numerator, &denominator)
        else {
            unreachable!("finite sums give finite moments")
        };
        let rscale = select_div_scale(a, *sa, b, *sb);
        let quotient = div_rounded(a, i64::from(*sa), b, i64::from(*sb), i64::from(rscale));
        let result = if variance {
            quotient
        } else {
            sqrt_rounded(&quotient, rscale, rscale)
        };
        Numeric::make(result, i64::from(rscale)).map(Some)
    }
}
