"""The sensor trainer of bug_millivolts_converted_before_standardizing.py with prepare() standardizing
the readings in millivolts, the unit their statistics were computed in: the inputs vary about one
standard deviation between recordings and the classifier learns."""
from bug_millivolts_converted_before_standardizing import main

if __name__ == "__main__":
    main(convert_units=False)
