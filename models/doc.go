// Package models holds the learners that forecast job duration and GPU-memory
// footprint, the feature pipeline shared by training and the live predictor,
// and the encoding of fitted artifacts. It reads no files and touches no
// network: callers hand it data.
//
// Every learner is a Regressor (quantile regression in log space, P50 and
// P90 at least) registered from its own file: golearn_forest (golearn ID3
// random trees over log-target classes, flattened into arrays),
// gorgonia_mlp (a perceptron trained with the pinball loss), knn (nearest
// neighbours through its own k-d tree, as golearn's KNN gives only a mean),
// the baselines rolling_median (comparable past jobs) and global_median, and
// ensemble, the median of the forest's, the MLP's and the rolling median's
// quantiles.
//
// FeatureConfig.Rows and History compute features causally: a job submitted
// at t sees only jobs whose outcome was known before t (EndTime, which for
// Philly is submit + run time). PeakWindow describes what has been seen of a
// running job's GPU memory (at least its first minutes) for the online
// refinement of its peak. Encode and
// Decode write and check artifacts (format version, SHA-256).
package models
