use dlio_loader::LoaderError;
use dlio_metrics::RankReport;
use dlio_plan::PlanError;

use crate::Aborted;

/// Why a rank stopped.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// Reading a batch failed.
    #[error(transparent)]
    Loader(#[from] LoaderError),
    /// The plan could not be built from the settings.
    #[error(transparent)]
    Plan(PlanError),
    /// A setting is out of range.
    #[error("{0}")]
    Setting(String),
    /// The names of the files to read could not be had (a manifest that cannot be read).
    #[error("reading the data set's file names: {0}")]
    Names(#[source] Box<dlio_storage::StorageError>),
    /// A checkpoint could not be written or read.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// Another rank failed or the run was interrupted.
    #[error(transparent)]
    Aborted(#[from] Aborted),
    /// Ctrl-C.
    #[error("interrupted")]
    Interrupted,
    /// The run stopped early; what was measured until then is kept for an incomplete summary.
    #[error("{error}")]
    Partial {
        /// The error that stopped the rank.
        error: Box<TrainError>,
        /// What the rank measured before it stopped.
        report: Box<RankReport>,
    },
}

impl TrainError {
    pub(crate) fn with_partial(self, report: RankReport) -> TrainError {
        TrainError::Partial {
            error: Box::new(self),
            report: Box::new(report),
        }
    }

    /// The error without the partial report.
    pub fn root(&self) -> &TrainError {
        match self {
            TrainError::Partial { error, .. } => error.root(),
            other => other,
        }
    }

    /// True when the run stopped because of Ctrl-C or another rank's failure.
    pub fn is_interruption(&self) -> bool {
        matches!(
            self.root(),
            TrainError::Interrupted | TrainError::Aborted(_)
        ) || matches!(self.root(), TrainError::Loader(LoaderError::Interrupted))
    }
}
