"""Inputs: images, text, audio and video through the model's own preprocessing, streamed as batches."""
