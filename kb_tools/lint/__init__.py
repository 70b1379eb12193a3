"""`kb lint`: the KB's mistakes found in a training script by reading its code."""
