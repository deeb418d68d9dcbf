#!/bin/bash
# Reference solution: count with wc.
wc -w < /app/text.txt | tr -d ' ' > /app/count.txt
