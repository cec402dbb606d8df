//! Placeholder: the pure HPA controller model lands here (issue 5).
