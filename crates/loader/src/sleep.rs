//! Emulated time: draws from the configured distributions of `computation_time`,
//! `eval_time` and `preprocess_time`.

use std::time::Duration;

use dlio_config::vocab::quantile_at;
use dlio_config::{TimeDistribution, duration_from_seconds};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_distr::{Distribution, Exp, Gamma, Normal, Poisson, Uniform};

/// A validated sleep-time distribution, ready to draw from.
///
/// DLIO sleeps the absolute value of each draw (a negative normal draw flips sign), and so do
/// we. Parameters that describe no distribution (a negative standard deviation, `min > max`,
/// a non-positive gamma shape ...) are rejected when the sampler is built, never replaced by a
/// default.
#[derive(Debug, Clone)]
pub struct TimeSampler {
    kind: Kind,
    mean: f64,
}

#[derive(Debug, Clone)]
enum Kind {
    Zero,
    Constant(f64),
    Normal(Normal<f64>),
    Uniform(Uniform<f64>),
    Gamma(Gamma<f64>),
    Exponential(Exp<f64>),
    Poisson(Poisson<f64>),
    /// Evenly spaced quantiles, in increasing order, drawn stratified (see [`Strata`]).
    Quantiles(std::sync::Arc<[f64]>, Strata),
    /// Measured times, each drawn once in every run of as many draws (see [`Strata`]).
    Empirical(std::sync::Arc<[f64]>, Strata),
}

/// Stratified draws of a measured distribution: each run of `n` draws takes one uniform
/// variate from each of `n` equal strata of [0, 1), in a random order. Every draw is still
/// uniform on [0, 1) (the measured distribution, once the quantiles map it), but the sum of
/// `n` draws no longer wanders: a replay of a traced program lasts what the program's pauses
/// add up to (independent draws of 16 quantiles over 70 steps move that sum by about 4%).
/// Written by hand: a shuffled deck of stratum indices is all it takes.
#[derive(Debug, Clone, Default)]
struct Strata {
    /// The strata left to draw in this run, in the order they will be drawn (last first).
    deck: Vec<u32>,
}

impl Strata {
    /// The next of `n` strata (0-based), starting a new run when one ends.
    fn next_stratum<R: Rng + ?Sized>(&mut self, n: usize, rng: &mut R) -> usize {
        if self.deck.is_empty() {
            // Refilled in place: after the first run, no allocation per draw.
            self.deck.extend(0..n.max(1) as u32);
            self.deck.shuffle(rng);
        }
        self.deck.pop().unwrap_or(0) as usize
    }

    /// A variate on [0, 1) from the next stratum of `n`, starting a new run when one ends.
    fn next<R: Rng + ?Sized>(&mut self, n: usize, rng: &mut R) -> f64 {
        let stratum = self.next_stratum(n, rng);
        let within: f64 = rand_distr::StandardUniform.sample(rng);
        (stratum as f64 + within) / n.max(1) as f64
    }
}

impl TimeSampler {
    /// Checks the parameters of `dist`; `key` names the config key in the error.
    pub fn new(key: &str, dist: &TimeDistribution) -> Result<TimeSampler, String> {
        let bad = |why: String| format!("`{key}`: {why}");
        let kind = match *dist {
            TimeDistribution::Constant { value: 0.0 } => Kind::Zero,
            TimeDistribution::Constant { value } => {
                if !value.is_finite() {
                    return Err(bad(format!("{value} is not a number of seconds")));
                }
                Kind::Constant(value.abs())
            }
            TimeDistribution::Normal { mean, stdev } => {
                if !(stdev >= 0.0 && stdev.is_finite() && mean.is_finite()) {
                    return Err(bad(format!(
                        "normal(mean {mean}, stdev {stdev}): stdev must be a number >= 0"
                    )));
                }
                Kind::Normal(
                    Normal::new(mean, stdev)
                        .map_err(|e| bad(format!("normal(mean {mean}, stdev {stdev}): {e}")))?,
                )
            }
            TimeDistribution::Uniform { min, max } => {
                Kind::Uniform(Uniform::new_inclusive(min, max).map_err(|e| {
                    bad(format!(
                        "uniform(min {min}, max {max}): {e}; min must be <= max"
                    ))
                })?)
            }
            TimeDistribution::Gamma { shape, scale } => {
                Kind::Gamma(Gamma::new(shape, scale).map_err(|e| {
                    bad(format!(
                        "gamma(shape {shape}, scale {scale}): {e}; both must be > 0"
                    ))
                })?)
            }
            TimeDistribution::Exponential { scale } => {
                if !(scale > 0.0 && scale.is_finite()) {
                    return Err(bad(format!(
                        "exponential(scale {scale}): scale must be > 0"
                    )));
                }
                Kind::Exponential(
                    Exp::new(1.0 / scale)
                        .map_err(|e| bad(format!("exponential(scale {scale}): {e}")))?,
                )
            }
            TimeDistribution::Poisson { lam } => Kind::Poisson(
                Poisson::new(lam)
                    .map_err(|e| bad(format!("poisson(lam {lam}): {e}; lam must be > 0")))?,
            ),
            TimeDistribution::Quantiles { ref values } => {
                if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
                    return Err(bad(
                        "quantiles: the values must be numbers of seconds".into()
                    ));
                }
                Kind::Quantiles(values.as_slice().into(), Strata::default())
            }
            TimeDistribution::Empirical { ref values } => {
                if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
                    return Err(bad(
                        "empirical: the values must be numbers of seconds".into()
                    ));
                }
                Kind::Empirical(values.as_slice().into(), Strata::default())
            }
        };
        Ok(TimeSampler {
            kind,
            mean: dist.mean(),
        })
    }

    /// The distribution's mean, in seconds.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// True when every draw is nothing to sleep.
    pub fn is_zero(&self) -> bool {
        matches!(self.kind, Kind::Zero)
    }

    /// One draw, or `None` when there is nothing to sleep.
    pub fn draw<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Option<Duration> {
        let v = match &mut self.kind {
            Kind::Zero => return None,
            Kind::Constant(v) => *v,
            Kind::Normal(d) => d.sample(rng),
            Kind::Uniform(d) => d.sample(rng),
            Kind::Gamma(d) => d.sample(rng),
            Kind::Exponential(d) => d.sample(rng),
            Kind::Poisson(d) => d.sample(rng),
            Kind::Quantiles(q, strata) => {
                let u = strata.next((q.len() - 1).max(1), rng);
                quantile_at(q, u)
            }
            Kind::Empirical(values, strata) => values[strata.next_stratum(values.len(), rng)],
        };
        let v = v.abs();
        // Validation bounds the parameters; a draw past them still saturates, never panics.
        (v > 0.0).then(|| duration_from_seconds(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn mean_of(dist: TimeDistribution) -> f64 {
        let mut s = TimeSampler::new("k", &dist).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let n = 20_000;
        (0..n)
            .map(|_| s.draw(&mut rng).map_or(0.0, |d| d.as_secs_f64()))
            .sum::<f64>()
            / n as f64
    }

    #[test]
    fn quantiles_draw_within_them_around_their_mean() {
        let values = vec![0.020, 0.021, 0.021, 0.031];
        let dist = TimeDistribution::Quantiles {
            values: values.clone(),
        };
        let mean = dist.mean();
        // Stretches of a third each: midpoints 0.0205, 0.021, 0.026.
        assert!((mean - 0.0225).abs() < 1e-12, "{mean}");
        assert!((mean_of(dist.clone()) - mean).abs() < 0.01 * mean);
        let mut s = TimeSampler::new("k", &dist).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let draws: Vec<f64> = (0..2000)
            .map(|_| s.draw(&mut rng).unwrap().as_secs_f64())
            .collect();
        assert!(
            draws
                .iter()
                .all(|&d| (0.020 - 1e-9..=0.031 + 1e-9).contains(&d))
        );
        // A third of the draws fall in the top stretch (21 to 31 ms).
        let top = draws.iter().filter(|&&d| d > 0.0211).count();
        assert!((550..780).contains(&top), "{top}");
        assert_eq!(quantile_at(&[0.5], 0.7), 0.5);
    }

    #[test]
    fn quantile_draws_sum_to_their_mean_within_each_run_of_strata() {
        // 0 ms or 40 ms, a pause of a step that merged with the next one or a full one.
        let values = vec![0.0, 0.0, 0.040, 0.040, 0.040];
        let dist = TimeDistribution::Quantiles { values };
        let mean = dist.mean();
        let mut s = TimeSampler::new("k", &dist).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        // 4 stretches: every 4 draws hold one from each, whatever the order.
        for _ in 0..50 {
            let run: f64 = (0..4)
                .map(|_| s.draw(&mut rng).map_or(0.0, |d| d.as_secs_f64()))
                .sum();
            assert!(
                (run - 4.0 * mean).abs() <= 0.02 + 1e-9,
                "{run} for {}",
                4.0 * mean
            );
        }
    }

    #[test]
    fn measured_times_are_each_drawn_once_in_every_run_of_as_many_draws() {
        // 32 steps of 20 ms and one slow first step of 440 ms: every 33 draws spend exactly
        // their sum (quantiles would give the 440 ms half the weight and interpolate it).
        let values: Vec<f64> = std::iter::once(0.440).chain([0.020; 32]).collect();
        let dist = TimeDistribution::Empirical {
            values: values.clone(),
        };
        assert!((dist.mean() - 1.08 / 33.0).abs() < 1e-12);
        let mut s = TimeSampler::new("k", &dist).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for _ in 0..20 {
            let mut run: Vec<f64> = (0..33)
                .map(|_| s.draw(&mut rng).unwrap().as_secs_f64())
                .collect();
            run.sort_by(f64::total_cmp);
            let mut want = values.clone();
            want.sort_by(f64::total_cmp);
            for (got, want) in run.iter().zip(&want) {
                assert!((got - want).abs() < 1e-9, "{run:?}");
            }
        }
        // The order differs between runs and with the seed.
        let order = |seed| {
            let mut s = TimeSampler::new("k", &dist).unwrap();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            (0..33)
                .position(|_| s.draw(&mut rng).unwrap().as_secs_f64() > 0.1)
                .unwrap()
        };
        assert!(
            (0..8)
                .map(order)
                .collect::<std::collections::HashSet<_>>()
                .len()
                > 1
        );
    }

    #[test]
    fn every_distribution_draws_around_its_mean() {
        let close = |a: f64, b: f64| (a - b).abs() < 0.05 * b;
        assert!(close(
            mean_of(TimeDistribution::Constant { value: 0.25 }),
            0.25
        ));
        assert!(close(
            mean_of(TimeDistribution::Normal {
                mean: 1.0,
                stdev: 0.1
            }),
            1.0
        ));
        assert!(close(
            mean_of(TimeDistribution::Uniform { min: 0.5, max: 1.5 }),
            1.0
        ));
        assert!(close(
            mean_of(TimeDistribution::Gamma {
                shape: 2.0,
                scale: 0.5
            }),
            1.0
        ));
        assert!(close(
            mean_of(TimeDistribution::Exponential { scale: 0.2 }),
            0.2
        ));
        assert!(close(mean_of(TimeDistribution::Poisson { lam: 3.0 }), 3.0));
    }

    #[test]
    fn negative_constant_sleeps_its_absolute_value() {
        let mut s = TimeSampler::new("k", &TimeDistribution::Constant { value: -1.0 }).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert_eq!(s.draw(&mut rng), Some(Duration::from_secs(1)));
    }

    #[test]
    fn zero_sleeps_nothing() {
        let mut s = TimeSampler::new("k", &TimeDistribution::Constant { value: 0.0 }).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert_eq!(s.draw(&mut rng), None);
    }

    #[test]
    fn impossible_parameters_are_errors_that_name_the_key() {
        let e = TimeSampler::new(
            "train.computation_time",
            &TimeDistribution::Normal {
                mean: 1.0,
                stdev: -1.0,
            },
        )
        .unwrap_err();
        assert!(e.contains("train.computation_time"), "{e}");
        assert!(TimeSampler::new("k", &TimeDistribution::Uniform { min: 2.0, max: 1.0 }).is_err());
        assert!(
            TimeSampler::new(
                "k",
                &TimeDistribution::Gamma {
                    shape: 0.0,
                    scale: 1.0
                }
            )
            .is_err()
        );
        assert!(TimeSampler::new("k", &TimeDistribution::Exponential { scale: 0.0 }).is_err());
        assert!(TimeSampler::new("k", &TimeDistribution::Poisson { lam: -1.0 }).is_err());
    }
}
