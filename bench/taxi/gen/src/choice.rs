//! Drawing from a fixed discrete distribution in constant time (Vose's alias method). Every
//! categorical column (cab type, passenger count, payment type, census tract, hour of day) is one
//! `WeightedChoice`, and a draw costs one random `u64`, one multiply and one comparison, which
//! matters at millions of rows per second.

/// A discrete distribution over `0..len`, built from relative weights.
pub struct WeightedChoice {
    /// Probability, scaled to 2^32, of keeping slot `i` rather than taking `alias[i]`.
    keep_threshold: Vec<u32>,
    alias: Vec<u32>,
}

impl WeightedChoice {
    /// Weights need not sum to one; zero weights are never drawn.
    pub fn new(weights: &[f64]) -> Self {
        let n = weights.len();
        assert!(
            n > 0 && n < u32::MAX as usize,
            "a choice needs 1..2^32 outcomes, got {n}"
        );
        assert!(
            weights.iter().all(|w| w.is_finite() && *w >= 0.0),
            "weights {weights:?}"
        );
        let total: f64 = weights.iter().sum();
        assert!(total > 0.0, "all weights are zero");
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        // Slots that end up without a partner (numerical leftovers, all close to 1) keep
        // themselves: threshold u32::MAX and alias pointing to itself.
        let mut keep_threshold = vec![u32::MAX; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            keep_threshold[s] = (scaled[s] * 4_294_967_296.0).min(u32::MAX as f64) as u32;
            alias[s] = l as u32;
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        WeightedChoice {
            keep_threshold,
            alias,
        }
    }

    /// The outcome for one uniformly random `u64`: the high half picks a slot, the low half
    /// decides between the slot and its alias.
    #[inline]
    pub fn pick(&self, random: u64) -> usize {
        let slot = (((random >> 32) * self.alias.len() as u64) >> 32) as usize;
        if (random as u32) < self.keep_threshold[slot] {
            slot
        } else {
            self.alias[slot] as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngCore, SeedableRng};

    #[test]
    fn frequencies_follow_the_weights() {
        let weights = [5.0, 0.0, 1.0, 3.0, 1.0];
        let choice = WeightedChoice::new(&weights);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut counts = [0u32; 5];
        let draws = 200_000;
        for _ in 0..draws {
            counts[choice.pick(rng.next_u64())] += 1;
        }
        assert_eq!(counts[1], 0, "a zero weight was drawn");
        for (count, weight) in counts.iter().zip(weights) {
            let expected = weight / 10.0;
            let seen = *count as f64 / draws as f64;
            assert!(
                (seen - expected).abs() < 0.01,
                "expected {expected}, saw {seen}"
            );
        }
    }

    #[test]
    fn a_single_outcome_is_always_drawn() {
        let choice = WeightedChoice::new(&[2.0]);
        assert_eq!(choice.pick(u64::MAX), 0);
        assert_eq!(choice.pick(0), 0);
    }
}
