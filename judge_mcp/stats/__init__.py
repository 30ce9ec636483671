"""What the verdict log says about the judges: the judge_stats report, labels, agreement with them, calibration."""
