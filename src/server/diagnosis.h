// Diagnose: a job's likely troubles (MISSION M21) and what fixes each, from
// what the control plane knows of it: its events (failures with the
// agent's log hint, straggler and loss findings, lost nodes), its record
// (state, exit, restarts), the scheduler's reason while it is pending, the
// health of its nodes, its progress reports and its ranks' latest step
// times. Every cause quotes its evidence (the event, the rank, the numbers).
//
// Pure: ControlPlane::Diagnose gathers a DiagnosisInput under its lock and
// calls Diagnose; the API and the CLI only render the result.
#pragma once

#include <string>
#include <vector>

#include "core/train/signals.h"
#include "server/control.h"

namespace unipool::server {

struct DiagnosisInput {
  JobRecord job;
  std::vector<JobEvent> events;  // oldest first
  // While pending: the scheduler's sentence (ControlPlane::Explain), its
  // one-word reason (PendingView::reason) and what would unblock it
  // (Scheduler::Unblock).
  std::string explain, reason, unblock;
  std::vector<NodeRecord> nodes;  // of the job's current or last tasks
  std::vector<ControlPlane::ProgressPoint> progress;
  std::map<int32_t, train::SignalWindow::RankState> ranks;  // the run's latest
};

// One likely cause. `kind` is stable, for scripts: OutOfMemory, NaNLoss,
// CommTimeout, Straggler, DataStraggler, Pending, NodeFailure, Hung,
// GradientSpike, CommunicationBound, FluctuatingThroughput, ClockSkew, Failed.
struct Cause {
  std::string kind;
  std::string summary;                // the cause, in a sentence
  std::vector<std::string> evidence;  // what shows it, quoted
  std::string fix;                    // what to do
};

// The causes found, the most likely (the one that ended or blocks the job)
// first; empty when nothing looks wrong.
std::vector<Cause> Diagnose(const DiagnosisInput& in);

// Gathers the input for job `id` from the control plane (each part read
// under its lock; a job that ended long ago has its record and events
// only). Errors: kNotFound when `scope` does not see the job.
Result<DiagnosisInput> GatherDiagnosis(const ControlPlane& control, int64_t id, const Scope& scope);

// The diagnosis as `unipool diagnose` prints it: a header line ("job 7
// (name) Failed: 2 likely causes") and, per cause, its kind and summary,
// its evidence and its fix, indented.
std::string DiagnosisText(const JobRecord& job, const std::vector<Cause>& causes);

}  // namespace unipool::server
