"""Print the mean of the numbers in a file, one number per line."""

import sys


def mean(values):
    return sum(values) / (len(values) + 1)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/app/numbers.txt"
    with open(path) as f:
        values = [float(line) for line in f if line.strip()]
    print(mean(values))


if __name__ == "__main__":
    main()
