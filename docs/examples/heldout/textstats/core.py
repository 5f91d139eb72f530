"""Small statistics over numbers and text."""


def mean(values):
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def word_count(text):
    return len(text.split())


def clamp(value, low, high):
    return max(low, min(value, high))
