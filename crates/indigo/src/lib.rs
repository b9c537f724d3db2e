//! Indigo: a congestion controller learned from calibrated emulators by imitation (the
//! Pantheon paper's §6, "Indigo: extracting an algorithm from data").
//!
//! Every 10 ms Indigo reads a state vector — EWMAs of the queueing delay, the sending rate and
//! the delivery rate, the congestion window, the minimum RTT, the previous action ([`state`]) —
//! and a policy, a one-layer LSTM of 32 units with a softmax over five actions on the window
//! (÷2, −10, +0, +10, ×2 packets; [`policy`]), picks one. The policy is trained by imitation:
//! an oracle that knows each training emulator's ideal window (the bandwidth-delay product per
//! flow on a constant link) labels every state the policy visits with the action that brings
//! the window nearest to a band just above it, and DAgger (roll out, label, aggregate, train,
//! repeat) makes the policy imitate it on the states its own decisions lead to ([`train`]).
//!
//! - [`state`]: the state vector from a connection's events, the actions, the oracle's choice
//!   (`pantheon-indigo-controller`'s, re-exported).
//! - [`policy`]: the network (candle), its model files (safetensors); at decision time, its
//!   frozen weights (`indigo_controller::frozen`, without candle).
//! - [`train`]: supervised training on labelled episodes, accuracy.
//! - [`controller`]: the quinn-proto congestion controller that runs it, in real time (the
//!   `indigo` scheme) and in simulated time (training rollouts) (`pantheon-indigo-controller`'s,
//!   re-exported).
//! - [`rollout`]: a flow of Indigo over a training emulator in simulated time; the oracle's
//!   ideal window per emulator.
//! - [`set`]: the training set (the paper's 24 synthetic emulators, presets, calibrated files).
//! - [`dagger`]: the training loop, resumable from its directory.
//! - [`models`]: the models trained here and committed, which the `indigo` and
//!   `indigo_nocalib` schemes run.

pub use indigo_controller::{controller, state};
pub mod dagger;
pub mod models;
pub mod policy;
pub mod rollout;
pub mod set;
pub mod train;
