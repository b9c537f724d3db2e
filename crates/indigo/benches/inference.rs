//! The cost of one Indigo decision, for each committed model: the LSTM step as the scheme runs
//! it (`Frozen`: plain arrays), the same step through candle's tensors (what training
//! computes with), their ratio, and a whole decision of the controller (`Core`: the state from
//! the observer, the step, the window) with the share of one core a flow's decisions take at
//! one per 10 ms.
//!
//! `cargo bench -p pantheon-indigo --bench inference` (nothing else running).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use candle::{Device, Tensor};
use pantheon_indigo::controller::{Core, IndigoFactory, DECISION_INTERVAL};
use pantheon_indigo::models::Trained;
use pantheon_indigo::policy::{argmax, Memory};
use pantheon_indigo::state::{Action, State, FEATURES};

/// Decision `i`'s state vector: values that vary, as a flow's do.
fn features(i: u32) -> [f32; FEATURES] {
    State {
        delay_ms: f64::from(i % 50),
        delivery_mbps: 10.0 + f64::from(i % 7),
        send_mbps: 11.0,
        cwnd: 40.0 + f64::from(i % 13),
        min_rtt_ms: 40.0,
        previous: Action::Keep,
    }
    .features()
}

fn main() {
    const N: u32 = 20_000;
    let interval_ns = DECISION_INTERVAL.as_nanos() as f64;
    for t in Trained::ALL {
        let policy = pantheon_indigo::models::policy(t).expect("the committed model");
        let frozen = Arc::new(policy.freeze().expect("frozen"));
        let mut memory = Memory::default();
        let started = Instant::now();
        for i in 0..N {
            black_box(argmax(&frozen.step(&features(i), &mut memory)));
        }
        let frozen_ns = started.elapsed().as_nanos() as f64 / f64::from(N);
        // The same step in candle (one step of a batch of one, the state carried detached).
        let mut state = policy.zero_state(1).expect("a state");
        let started = Instant::now();
        let candle_n = N / 10;
        for i in 0..candle_n {
            let xs = Tensor::from_slice(&features(i), (1, 1, FEATURES), &Device::Cpu).unwrap();
            let (logits, next) = policy.logits(&xs, &state).unwrap();
            black_box(logits.to_vec2::<f32>().unwrap());
            state = candle_nn::rnn::LSTMState::new(next.h.detach(), next.c.detach());
        }
        let candle_ns = started.elapsed().as_nanos() as f64 / f64::from(candle_n);
        // A whole decision of the controller: one acknowledgement per 10 ms, each a decision.
        let mut core = Core::new(Arc::new(IndigoFactory::new(frozen)));
        let ms = 1_000_000u64;
        let started = Instant::now();
        for i in 0..u64::from(N) {
            let now = (i + 1) * 10 * ms;
            core.on_sent(now, 1436);
            core.on_ack(now, now - 40 * ms, 1436);
            core.on_end_acks(now);
        }
        let decision_ns = started.elapsed().as_nanos() as f64 / f64::from(N);
        black_box(core.cwnd());
        println!(
            "{}: LSTM step {:.2} µs (candle {:.1} µs: {:.0}× slower); whole decision {:.2} µs, \
             {:.3} % of a core at one decision per {} ms",
            t.name(),
            frozen_ns / 1e3,
            candle_ns / 1e3,
            candle_ns / frozen_ns,
            decision_ns / 1e3,
            100.0 * decision_ns / interval_ns,
            DECISION_INTERVAL.as_millis()
        );
    }
}
