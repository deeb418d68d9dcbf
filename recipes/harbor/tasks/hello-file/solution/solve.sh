#!/bin/bash
# Reference solution: write the greeting.
printf 'Hello, Harbor!\n' > /app/greeting.txt
