"""errors"""
