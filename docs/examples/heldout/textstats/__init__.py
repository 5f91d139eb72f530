from textstats.core import clamp, mean, median, word_count

__all__ = ["clamp", "mean", "median", "word_count"]
