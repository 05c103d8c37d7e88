"""evidence_states: each sequential-evidence stream's e-detector between windows

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 21:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'evidence_states',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('model', sa.String(length=200), nullable=False),
        sa.Column('version', sa.String(length=100), nullable=False),
        sa.Column('stream', sa.String(length=520), nullable=False),
        sa.Column('state', sa.JSON(), nullable=False),
        sa.Column('last_window_start_ms', sa.BigInteger(), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_evidence_states')),
        sa.UniqueConstraint('model', 'version', 'stream', name=op.f('uq_evidence_states_model')),
    )


def downgrade() -> None:
    op.drop_table('evidence_states')
