//! `per_subject_concurrent`: every subject's workflow (its ambient calls, generations and
//! tool calls) runs at once, up to the configured limit, against the turn-start world; their
//! final patches are accepted into the working world in subject order (entity-id byte
//! order), as an ordered turn would. A patch that no longer applies when its turn comes goes
//! back to its subject, through that subject's retry lane, judged against the working world
//! as it then is.
//!
//! A subject holds a permit only while it works: it gives it up while its patch waits for
//! its turn, so the subject whose patch is next can always get one. When one subject fails,
//! the others are stopped and the attempt fails; their unfinished calls are marked
//! `interrupted` with the attempt.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;

use super::{AttemptError, PatchProvenance, PatchSink, TurnContext, Verdict, subject};
use crate::domain::ambient::SubjectPlan;
use crate::domain::patch::WorldPatch;
use crate::domain::turn::WorkingTurn;

struct Submission {
    patch: WorldPatch,
    provenance: PatchProvenance,
    reply: oneshot::Sender<Verdict>,
}

struct ChannelSink {
    submissions: mpsc::Sender<Submission>,
    semaphore: Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
}

fn ended() -> AttemptError {
    AttemptError::Internal("the attempt ended before this subject's patch was judged".into())
}

#[async_trait]
impl PatchSink for ChannelSink {
    async fn submit(
        &mut self,
        patch: WorldPatch,
        provenance: PatchProvenance,
    ) -> Result<Verdict, AttemptError> {
        // Waiting for our turn is not work: let a subject that can work have the permit.
        self.permit = None;
        let (reply, verdict) = oneshot::channel();
        self.submissions
            .send(Submission {
                patch,
                provenance,
                reply,
            })
            .await
            .map_err(|_| ended())?;
        let verdict = verdict.await.map_err(|_| ended())?;
        if matches!(verdict, Verdict::Rejected { .. }) {
            self.permit = Some(
                Arc::clone(&self.semaphore)
                    .acquire_owned()
                    .await
                    .map_err(|_| ended())?,
            );
        }
        Ok(verdict)
    }
}

/// Runs `subjects` concurrently and accepts their patches in order into `working`.
pub(super) async fn run(
    context: Arc<TurnContext>,
    subjects: Vec<SubjectPlan>,
    mut working: WorkingTurn,
    limit: usize,
) -> Result<(WorkingTurn, Vec<PatchProvenance>), AttemptError> {
    let start = Arc::new(working.world().clone());
    let semaphore = Arc::new(Semaphore::new(limit.max(1)));
    let mut tasks: JoinSet<Result<(), AttemptError>> = JoinSet::new();
    let mut queues = Vec::with_capacity(subjects.len());
    for plan in subjects {
        let (submissions, queue) = mpsc::channel(1);
        queues.push(queue);
        let context = Arc::clone(&context);
        let start = Arc::clone(&start);
        let semaphore = Arc::clone(&semaphore);
        tasks.spawn(async move {
            let permit = Arc::clone(&semaphore)
                .acquire_owned()
                .await
                .map_err(|_| ended())?;
            let mut sink = ChannelSink {
                submissions,
                semaphore,
                permit: Some(permit),
            };
            subject::run(&context, &plan, start, &mut sink).await
        });
    }

    let mut accepted = Vec::new();
    for mut queue in queues {
        loop {
            tokio::select! {
                submission = queue.recv() => {
                    let Some(submission) = submission else {
                        // The subject ended without a patch: it failed.
                        return Err(first_failure(&mut tasks).await);
                    };
                    let subject = submission.provenance.subject.clone();
                    match working.accept(&subject, submission.patch) {
                        Ok(_) => {
                            accepted.push(submission.provenance);
                            let _ = submission.reply.send(Verdict::Accepted);
                            break;
                        }
                        Err(problems) => {
                            let world = Arc::new(working.world().clone());
                            let _ = submission.reply.send(Verdict::Rejected { problems, world });
                        }
                    }
                }
                Some(joined) = tasks.join_next() => {
                    if let Some(error) = failure_of(joined) {
                        stop_all(&mut tasks).await;
                        return Err(error);
                    }
                }
            }
        }
    }
    while let Some(joined) = tasks.join_next().await {
        if let Some(error) = failure_of(joined) {
            stop_all(&mut tasks).await;
            return Err(error);
        }
    }
    Ok((working, accepted))
}

fn failure_of(
    joined: Result<Result<(), AttemptError>, tokio::task::JoinError>,
) -> Option<AttemptError> {
    match joined {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(error),
        Err(join) if join.is_cancelled() => None,
        Err(join) => Some(AttemptError::Internal(format!(
            "a subject task panicked: {join}"
        ))),
    }
}

/// The first subject failure, once one shows up; the other subjects are stopped.
async fn first_failure(tasks: &mut JoinSet<Result<(), AttemptError>>) -> AttemptError {
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        if let Some(error) = failure_of(joined) {
            failure = Some(error);
            break;
        }
    }
    stop_all(tasks).await;
    failure.unwrap_or_else(|| AttemptError::Internal("a subject ended without a patch".into()))
}

/// Stops every subject still running and waits until each has stopped, so nothing they
/// queued is written after the attempt is closed.
async fn stop_all(tasks: &mut JoinSet<Result<(), AttemptError>>) {
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
}
