#!/bin/bash
# Reference solution: divide by the number of values, not one more.
sed -i 's/(len(values) + 1)/len(values)/' /app/average.py
